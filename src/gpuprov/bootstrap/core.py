"""`gpuprov bootstrap`: preflight every host, then apply playbooks/site.yml through the Ansible engine.

The engine (gpuprov.ansible.engine) checks the input, opens the run directory, runs the playbook and reports;
this verb adds its preflight (SSH, host key, sudo, OS and the lock on every host) and stops the run before
Ansible starts when any host fails it.
"""

from __future__ import annotations

import functools
from typing import Any

from gpuprov import console, host_preflight
from gpuprov.ansible import arguments, engine
from gpuprov.ansible.arguments import Options
from gpuprov.errors import GpuprovError

VERB = "bootstrap"
PLAYBOOK = "site.yml"  # under playbooks/ (an absolute path in tests)


def run(options: Options, *, full: bool = False) -> dict[str, Any]:
    """Bootstrap the inventory's hosts; returns the summary, or raises GpuprovError with the exit code.
    Without --tags, --skip-tags and --check, the drift check picks the hosts and roles that need a run
    (gpuprov.bootstrap.drift_run); `full` runs every role on every host and renews the records."""
    chosen = bool(options.tags or options.skip_tags or options.check)
    checks = functools.partial(check_hosts, drift_check=None if chosen else not full)
    return engine.run_playbook(VERB, arguments.playbook_path(PLAYBOOK), options, checks=checks)


def check_hosts(run: engine.Run, drift_check: bool | None = None) -> None:
    """The preflight, recorded in the summary; raises GpuprovError (nothing applied) when a host fails it.
    drift_check: None, no drift check; False, record after the run only (--full); True, compare and plan."""
    names = run.inventory.names
    console.step(
        f"Preflight on {len(names)} host(s): SSH with host key checking, sudo, OS, GPUs, compatibility lock"
    )
    checker = None
    if drift_check is not None:
        from gpuprov.bootstrap.drift_run import DriftCheck

        checker = DriftCheck(run, checking=drift_check)
    also = checker.probe if checker is not None and checker.checking else None
    reports, lock_problems = host_preflight.run(run.inventory, run.extravars, also)
    problems = [p for r in reports for p in r.problems] + lock_problems
    run.summary["preflight"] = host_preflight.summary(reports, lock_problems)
    for report in reports:
        for warning in report.warnings:
            console.warning(f"{run.inventory.host(report.host).label}: {warning}")
    warnings = run.summary["preflight"]["lock_warnings"] = lock_warnings(run)
    for problem in problems:
        run.directory.log(f"preflight {problem.host}: {problem.check}: {problem.message}")
    for warning in warnings:
        run.directory.log(f"preflight warning: {warning}")
    if problems:
        code = host_preflight.exit_code(reports, lock_problems)
        run.finish("preflight_failed", code)
        if len(problems) == 1:
            only = problems[0]
            label = run.inventory.host(only.host).label if only.host in names else only.host
            raise GpuprovError(f"{label}: {only.message}; nothing was applied to any host", code)
        preflight_table(reports, lock_problems)
        bad_hosts = sorted({p.host for p in problems})
        raise GpuprovError(
            f"preflight found {len(problems)} problems ({', '.join(bad_hosts)}); "
            f"nothing was applied to any host; run log: {run.directory.path}",
            code,
        )
    for warning in warnings:  # on the console once the run goes on: a failed preflight says one thing
        console.warning(warning)
    systems = sorted({r.os for r in reports})
    console.success(f"Preflight ok on {len(names)} host(s) ({', '.join(systems)})")
    if checker is not None:
        checker.decide(run, reports)


def lock_warnings(run: engine.Run) -> list[str]:
    """What the lock check warns about (a driver branch past its end of life), once per distinct lock."""
    from gpuprov import lock

    messages: list[str] = []
    for host in run.inventory.hosts:
        stack = run.extravars.get("gpu_stack", host.vars.get("gpu_stack"))
        try:
            found = lock.warnings(stack) if stack is not None else []
        except (OSError, ValueError):  # an unreadable table is the preflight's lock problem
            found = []
        messages += [message for message in found if message not in messages]
    return messages


def preflight_table(
    reports: list[host_preflight.HostReport], lock_problems: list[host_preflight.Problem]
) -> None:
    rows = []
    for report in reports:
        if not report.problems:
            rows.append([report.host, "ok", report.os or "-"])
        for problem in report.problems:
            rows.append([report.host, problem.check, problem.message])
    rows += [[p.host, p.check, p.message] for p in lock_problems]
    console.table("Preflight: problems found, nothing was applied", ["host", "check", "result"], rows)
