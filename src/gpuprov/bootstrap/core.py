"""`gpuprov bootstrap`: read the inventory, preflight every host, apply the playbook, report.

Order matters: input (extra vars, inventory, limit) is checked first, then preflight reaches every host
over SSH; only when nothing is wrong does Ansible start. Every run leaves a run directory with the full
log, runner's artifacts and summary.json.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from pathlib import Path
from typing import Any

from gpuprov import console, hosts
from gpuprov.bootstrap import arguments, display, preflight, runner
from gpuprov.bootstrap.arguments import Options
from gpuprov.bootstrap.events import HostState, Tracker
from gpuprov.bootstrap.runs import RunDir
from gpuprov.errors import EnvironmentProblem, ExitCode, GpuprovError


def run(options: Options) -> dict[str, Any]:
    """Bootstrap the inventory's hosts; returns the summary, or raises GpuprovError with the exit code."""
    extravars = arguments.parse_extra_vars(options.extra_vars)
    arguments.strategy_envvars(options.strategy)  # Mitogen asked for but missing: say so before any work
    inventory = hosts.load(options.inventory, limit=options.limit)
    hosts.check_ssh_files(
        inventory.hosts,
        where=f"{inventory.path}: host ",
        fix="fix the path in the inventory",
        ansible_templates=True,
    )
    forks = arguments.forks_for(len(inventory.hosts), options.forks)
    if not options.playbook.is_file():
        raise EnvironmentProblem(f"playbook {options.playbook} is missing; reinstall gpuprov")

    started = time.time()
    run_dir = RunDir()
    summary: dict[str, Any] = {
        "run_id": run_dir.id,
        "run_dir": str(run_dir.path),
        "inventory": str(options.inventory),
        "playbook": str(options.playbook),
        "limit": options.limit,
        "tags": list(options.tags),
        "skip_tags": list(options.skip_tags),
        "check": options.check,
        "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "forks": forks,
    }
    try:
        return _run(options, inventory, extravars, run_dir, summary, started)
    finally:
        run_dir.close()


def _run(
    options: Options,
    inventory: hosts.Inventory,
    extravars: dict[str, Any],
    run_dir: RunDir,
    summary: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    names = inventory.names
    run_dir.log(f"inventory {options.inventory}: {len(names)} host(s): {', '.join(names)}")

    # ----- preflight
    console.step(
        f"Preflight on {len(names)} host(s): SSH with host key checking, sudo, OS, compatibility lock"
    )
    reports, lock_problems = preflight.run(inventory, extravars)
    problems = [p for r in reports for p in r.problems] + lock_problems
    summary["preflight"] = {
        "hosts": {r.host: {"os": r.os, "problems": [p.as_dict() for p in r.problems]} for r in reports},
        "lock_problems": [p.as_dict() for p in lock_problems],
    }
    for problem in problems:
        run_dir.log(f"preflight {problem.host}: {problem.check}: {problem.message}")
    if problems:
        code = preflight.exit_code(reports, lock_problems)
        _finish(summary, run_dir, started, status="preflight_failed", code=code, options=options)
        if len(problems) == 1:
            only = problems[0]
            label = inventory.host(only.host).label if only.host in names else only.host
            raise GpuprovError(f"{label}: {only.message}; nothing was applied to any host", code)
        display.preflight_table(reports, lock_problems)
        bad_hosts = sorted({p.host for p in problems})
        raise GpuprovError(
            f"preflight found {len(problems)} problems ({', '.join(bad_hosts)}); "
            f"nothing was applied to any host; run log: {run_dir.path}",
            code,
        )
    systems = sorted({r.os for r in reports})
    console.success(f"Preflight ok on {len(names)} host(s) ({', '.join(systems)})")

    # ----- the run
    def build_kwargs(private_data_dir: Path) -> dict[str, Any]:
        return arguments.runner_kwargs(
            options,
            extravars=extravars,
            host_count=len(names),
            private_data_dir=private_data_dir,
            artifact_dir=run_dir.root,
            ident=run_dir.id,
        )

    tracker = Tracker(names)
    live = console.is_terminal() and console.verbosity() >= console.Verbosity.NORMAL
    tracker.listeners.append(display.listener(run_dir.log, plain=not live))
    mode = " in check mode (nothing is changed)" if options.check else ""
    forks = summary["forks"]
    console.step(f"Applying {options.playbook.name} to {len(names)} host(s){mode}; forks={forks}")
    title = f"gpuprov bootstrap: {options.playbook.name}{' (check mode)' if options.check else ''}"
    context = console.live(display.LiveProgress(tracker, title)) if live else contextlib.nullcontext()
    with context:
        outcome = runner.execute(build_kwargs, tracker.handle, run_dir.log)
    run_dir.log(f"ansible-runner finished: status={outcome.status} rc={outcome.rc}")

    # ----- report
    # The inventory's hosts, and any other host (the control node's checks on localhost) only if it failed.
    states = [tracker.hosts[name] for name in names] + [
        state
        for name, state in tracker.hosts.items()
        if name not in names and (state.failed or state.unreachable)
    ]
    summary["hosts"] = {state.name: state.as_dict() for state in states}
    summary["versions"] = {state.name: state.versions for state in states if state.versions}
    summary["ansible_rc"] = outcome.rc
    status, code, message = _verdict(outcome, states, run_dir)
    _finish(summary, run_dir, started, status=status, code=code, options=options)
    if not live or outcome.canceled or code != ExitCode.OK or console.verbosity() >= console.Verbosity.NORMAL:
        display.end_table(states, f"Bootstrap {status} in {summary['duration_s']:.0f}s")
    console.info(f"Run directory (full log, events, summary.json): {run_dir.path}")
    if code != ExitCode.OK:
        raise GpuprovError(message, code)
    console.success(f"Bootstrap finished on {len(names)} host(s)")
    return summary


def _verdict(outcome: runner.Outcome, states: list[HostState], run_dir: RunDir) -> tuple[str, ExitCode, str]:
    unreachable = [s.name for s in states if s.unreachable]
    failed = [s.name for s in states if s.failed]
    where = f"run log: {run_dir.path / 'stdout'}"
    if outcome.canceled:
        busy = [f"{s.name} ({s.task})" for s in states if s.task and not s.finished]
        during = f" while {', '.join(busy)} ran" if busy else ""
        return (
            "interrupted",
            ExitCode.INTERRUPTED,
            f"interrupted: Ansible was stopped{during}; a host may have that task half done (a package "
            f"half-installed or a config file not yet reloaded); run the same command again to finish: "
            f"the roles converge; {where}",
        )
    if unreachable:
        return (
            "unreachable",
            ExitCode.HOSTS_UNREACHABLE,
            f"{len(unreachable)} host(s) became unreachable during the run: "
            f"{', '.join(unreachable)}; {where}",
        )
    if failed:
        return (
            "failed",
            ExitCode.HOSTS_FAILED,
            f"bootstrap failed on {len(failed)} of {len(states)} host(s): {', '.join(failed)}; {where}",
        )
    if outcome.rc != 0:
        return ("error", ExitCode.FAILURE, f"Ansible stopped with an error: {_last_error(run_dir)}; {where}")
    return ("ok", ExitCode.OK, "")


def _last_error(run_dir: RunDir) -> str:
    """The ERROR line of Ansible's log (a playbook syntax error, a missing role), on one line."""
    try:
        text = (run_dir.path / "stdout").read_text(errors="replace")
    except OSError:
        return "no output (see the run directory)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith(("ERROR!", "[ERROR]")):
            return " ".join([line, *lines[index + 1 : index + 3]])[:400]
    return lines[-1][:400] if lines else "no output"


def _finish(
    summary: dict[str, Any], run_dir: RunDir, started: float, *, status: str, code: ExitCode, options: Options
) -> None:
    summary["status"] = status
    summary["exit_code"] = int(code)
    summary["duration_s"] = round(time.time() - started, 2)
    path = run_dir.write_summary(summary)
    run_dir.log(f"finished: {status} (exit {int(code)}); summary: {path}")
    if options.json_output:
        console.result(json.dumps(summary, indent=2))
