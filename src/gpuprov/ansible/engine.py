"""Run a playbook for a verb: `run_playbook(verb, playbook, options, checks=...)`.

Order matters: input (extra vars, strategy, inventory, limit, the playbook) is checked before anything else
and leaves no trace when refused; then a run directory opens and the verb's own checks run (a preflight
that reaches every host over SSH, say); only when they pass does Ansible start. Every run that got a run
directory leaves its full log, runner's artifacts and summary.json, which names the verb.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprov import console, hosts, paths, resources
from gpuprov.ansible import arguments, display, estimate, runner, runs, tags
from gpuprov.ansible.arguments import Options
from gpuprov.ansible.estimate import Estimator
from gpuprov.ansible.events import HostState, Tracker
from gpuprov.ansible.runs import RunDir
from gpuprov.errors import EnvironmentProblem, ExitCode, GpuprovError


@dataclass
class Run:
    """One run of a playbook for a verb: what the verb's checks get before Ansible starts."""

    verb: str
    playbook: Path
    options: Options
    inventory: hosts.Inventory
    extravars: dict[str, Any]
    directory: RunDir
    summary: dict[str, Any]  # becomes summary.json; a verb's checks may add their own section
    started: float
    # Set by a verb's checks: nothing for Ansible to do (bootstrap's drift check found no drift), and what
    # to do with the run's outcome before it is recorded (the hosts' states after Ansible).
    skip_ansible: bool = False
    after_ansible: Callable[[Run, runner.Outcome, list[HostState]], None] | None = None

    @property
    def title(self) -> str:
        """The verb as the first word of a line: "Bootstrap"."""
        return self.verb[:1].upper() + self.verb[1:]

    def finish(self, status: str, code: ExitCode) -> None:
        """Record how the run ended in summary.json (and print it with --json)."""
        self.summary["status"] = status
        self.summary["exit_code"] = int(code)
        self.summary["duration_s"] = round(time.time() - self.started, 2)
        path = self.directory.write_summary(self.summary)
        self.directory.log(f"finished: {status} (exit {int(code)}); summary: {path}")
        if self.options.json:
            console.result(json.dumps(self.summary, indent=2))


Checks = Callable[[Run], None]


def run_playbook(
    verb: str, playbook: Path, options: Options, *, checks: Checks | None = None
) -> dict[str, Any]:
    """Apply `playbook` to the inventory's hosts for `verb`; returns the summary, or raises GpuprovError with
    the exit code. `checks(run)`, when given, runs before Ansible: to stop the run it calls
    run.finish(status, code) and raises GpuprovError."""
    extravars, inventory, forks = _prepare(playbook, options)
    need_mb, need_files = runs.room_needed(len(inventory.hosts))  # the hosts after --limit
    paths.writable_state_dir(  # after the input, before any host
        verb, need_mb=need_mb, need_files=need_files, why=f" for {len(inventory.hosts)} host(s)"
    )
    started = time.time()
    directory = RunDir()
    summary: dict[str, Any] = {
        runs.VERB: verb,
        "run_id": directory.id,
        "run_dir": str(directory.path),
        "inventory": str(options.inventory),
        "inventory_path": str(options.inventory.resolve()),  # the estimate's prior: a run of this inventory
        "playbook": str(playbook),
        "limit": options.limit,
        "tags": list(options.tags),
        "skip_tags": list(options.skip_tags),
        "check": options.check,
        "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "forks": forks,
    }
    run = Run(verb, playbook, options, inventory, extravars, directory, summary, started)
    try:
        names = inventory.names
        directory.log(
            f"gpuprov {verb}: inventory {options.inventory}: {len(names)} host(s): {', '.join(names)}"
        )
        if checks is not None:
            checks(run)
        if run.skip_ansible:
            return _without_ansible(run)
        return _apply(run)
    finally:
        directory.close()


def _prepare(playbook: Path, options: Options) -> tuple[dict[str, Any], hosts.Inventory, int]:
    """The extra vars, the inventory (limited) and the forks; BadInput before any work when one is wrong."""
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
    if not playbook.is_file():
        raise EnvironmentProblem(f"playbook {playbook} is missing; reinstall gpuprov")
    tags.check(playbook, resources.data_dir("roles"), options.tags, options.skip_tags)
    return extravars, inventory, forks


def _apply(run: Run) -> dict[str, Any]:
    names = run.inventory.names

    def build_kwargs(private_data_dir: Path) -> dict[str, Any]:
        return arguments.runner_kwargs(
            run.options,
            playbook=run.playbook,
            extravars=run.extravars,
            host_count=len(names),
            private_data_dir=private_data_dir,
            artifact_dir=run.directory.root,
            ident=run.directory.id,
        )

    tracker = Tracker(names)
    live = console.is_terminal() and console.verbosity() >= console.Verbosity.NORMAL
    estimator = _estimator(run, tracker, live)
    mode = " in check mode (nothing is changed)" if run.options.check else ""
    console.step(f"Applying {run.playbook.name} to {len(names)} host(s){mode}; forks={run.summary['forks']}")
    title = f"gpuprov {run.verb}: {run.playbook.name}{' (check mode)' if run.options.check else ''}"
    progress = display.LiveProgress(tracker, title, estimator)
    context = console.live(progress) if live else contextlib.nullcontext()
    # Not under runs.private_files(): ansible-playbook and every module it runs on a host reached with
    # ansible_connection=local would inherit umask 077 (a login node's venv 0700). What runner writes is
    # private anyway: the run directory is 0700, and RunDir.close() makes its files 0600.
    with context:
        outcome = runner.execute(build_kwargs, tracker.handle, run.directory.log)
    run.directory.log(f"ansible-runner finished: status={outcome.status} rc={outcome.rc}")
    run.summary["roles"] = tracker.clock.table()
    run.summary["timeline"] = tracker.clock.timelines()  # what the next run's estimate reads
    run.summary["progress"] = {
        **estimator.progress(tracker.now).as_dict(),
        "estimated_at_start_s": round(estimator.samples[0][1], 1) if estimator.samples else None,
        "halfway": estimator.accuracy(tracker.now),
    }
    return _report(run, outcome, tracker, live)


def _without_ansible(run: Run) -> dict[str, Any]:
    """The end of a run whose checks found nothing for Ansible to do: every host ok, nothing changed."""
    run.summary["ansible_rc"] = None
    run.summary["hosts"] = {name: untouched_host(name) for name in run.inventory.names}
    run.finish("ok", ExitCode.OK)
    console.info(f"Run directory (log, summary.json): {run.directory.path}")
    console.success(f"{run.title} finished on {len(run.inventory.names)} host(s) without an Ansible run")
    return run.summary


def untouched_host(name: str) -> dict[str, Any]:
    """The summary's entry for a host Ansible did not run on, as its checks found it: ok, nothing changed."""
    return HostState(name).as_dict() | {"status": "ok"}


def _estimator(run: Run, tracker: Tracker, live: bool) -> Estimator:
    """The estimate of the time left, from the last ok run of the same verb, playbook, tags, mode and
    inventory that covered every host of this one; its lines (one per role per host) and the run log's lines
    as the events come."""
    keys = (runs.VERB, "playbook", "tags", "skip_tags", "check", "inventory_path")
    alike = {key: run.summary[key] for key in keys}
    prior = estimate.find_prior(alike, run.directory.id, hosts=run.inventory.names)
    estimator = Estimator(tracker.clock, run.inventory.names, prior)
    tracker.listeners.append(lambda kind, data: estimator.observe(kind, tracker.now))
    tracker.listeners.append(display.listener(run.directory.log, plain=not live))
    if not live:
        tracker.listeners.append(display.role_lines(estimator, lambda: tracker.now))
    return estimator


def _report(run: Run, outcome: runner.Outcome, tracker: Tracker, live: bool) -> dict[str, Any]:
    names = run.inventory.names
    # The inventory's hosts, and any other host (the control node's checks on localhost) only if it failed.
    states = [tracker.hosts[name] for name in names] + [
        state
        for name, state in tracker.hosts.items()
        if name not in names and (state.failed or state.unreachable)
    ]
    run.summary["hosts"] = {state.name: state.as_dict() for state in states}
    run.summary["versions"] = {state.name: state.versions for state in states if state.versions}
    run.summary["ansible_rc"] = outcome.rc
    if run.after_ansible is not None:
        run.after_ansible(run, outcome, states)
    status, code, message = _verdict(run, outcome, states)
    run.finish(status, code)
    if not live or outcome.canceled or code != ExitCode.OK or console.verbosity() >= console.Verbosity.NORMAL:
        display.end_table(states, f"{run.title} {status} in {run.summary['duration_s']:.0f}s")
    console.info(f"Run directory (full log, events, summary.json): {run.directory.path}")
    if code != ExitCode.OK:
        raise GpuprovError(message, code)
    console.success(f"{run.title} finished on {len(names)} host(s)")
    return run.summary


def _verdict(run: Run, outcome: runner.Outcome, states: list[HostState]) -> tuple[str, ExitCode, str]:
    unreachable = [s.name for s in states if s.unreachable]
    failed = [s.name for s in states if s.failed]
    where = f"run log: {run.directory.path / 'stdout'}"
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
            f"{run.verb} failed on {len(failed)} of {len(states)} host(s): {', '.join(failed)}; {where}",
        )
    if outcome.rc != 0:
        return (
            "error",
            ExitCode.FAILURE,
            f"Ansible stopped with an error: {_last_error(run.directory)}; {where}",
        )
    return ("ok", ExitCode.OK, "")


def _last_error(directory: RunDir) -> str:
    """The ERROR line of Ansible's log (a playbook syntax error, a missing role), on one line."""
    try:
        text = (directory.path / "stdout").read_text(errors="replace")
    except OSError:
        return "no output (see the run directory)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith(("ERROR!", "[ERROR]")):
            return " ".join([line, *lines[index + 1 : index + 3]])[:400]
    return lines[-1][:400] if lines else "no output"
