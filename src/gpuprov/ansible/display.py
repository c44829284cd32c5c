"""How an Ansible run looks in the terminal: live progress, then tables. Output goes through gpuprov.console.

On a terminal: a live table, one row per host (current task, ok/changed/failed counts). Without a terminal
(CI logs) or with --quiet: plain lines, one per noteworthy result, so logs read top to bottom.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from gpuprov import console
from gpuprov.ansible.estimate import Estimator, duration
from gpuprov.ansible.events import HostState, Tracker, failure_message

_STYLE = {
    "ok": "green",
    "changed": "yellow",
    "failed": "bold red",
    "unreachable": "bold red",
    "pending": "dim",
}


class LiveProgress:
    """A rich renderable: re-read from the tracker at every refresh of the Live display."""

    def __init__(self, tracker: Tracker, title: str, estimator: Estimator | None = None) -> None:
        self.tracker = tracker
        self.title = title
        self.estimator = estimator

    def __rich__(self) -> Group:
        """The table of hosts, and under it the overall progress and the time left."""
        parts: list[Table | Text] = [self._table()]
        if self.estimator is not None:
            parts.append(Text(self.estimator.progress(time.time()).line(), style="bold"))
        return Group(*parts)

    def _table(self) -> Table:
        grid = Table(title=self.title, title_justify="left", expand=False)
        for column in ("host", "status", "ok", "changed", "failed", "skipped", "tasks", "current task"):
            grid.add_column(
                column, overflow="ellipsis", no_wrap=True, max_width=70 if column == "current task" else None
            )
        for host in list(self.tracker.hosts.values()):
            if host.name not in self.tracker.targets and not (host.failed or host.unreachable):
                continue  # the control node's own checks (localhost) show only when they fail
            status = host.status
            task = "done" if host.finished else host.task
            grid.add_row(
                host.name,
                f"[{_STYLE[status]}]{status}[/]",
                str(host.ok),
                str(host.changed),
                str(host.failed + host.unreachable),
                str(host.skipped),
                self._tasks(host.name),
                task,
                style=None,
            )
        return grid

    def _tasks(self, host: str) -> str:
        """Tasks done on host, and of how many the last run like this one ran there."""
        done = sum(t.tasks for t in self.tracker.clock.hosts.get(host, {}).values())
        prior = self.estimator.prior if self.estimator is not None else None
        expected = len(prior.for_host(host)) if prior else 0
        return f"{done}/{max(done, expected)}" if expected else str(done)


def role_lines(estimator: Estimator, now: Callable[[], float]) -> Callable[[str, Mapping[str, Any]], None]:
    """Without a terminal: one line per role per host as it finishes, with the overall progress."""

    def listen(kind: str, data: Mapping[str, Any]) -> None:
        finished, estimator.clock.finished = estimator.clock.finished, []
        for stretch in finished:
            if stretch.host not in estimator.hosts:
                continue  # the control node's own checks (localhost), as in the live table
            progress = estimator.progress(now())
            console.info(
                f"{stretch.host}: {stretch.role} done in {duration(stretch.seconds)} "
                f"({stretch.tasks} tasks); {progress.line()}"
            )

    return listen


def describe(kind: str, data: Mapping[str, Any]) -> tuple[str, str] | None:
    """One log line for an event and its level (play, changed, ok, skipped, ignored, failed), or None."""
    host = str(data.get("host") or "")
    task = str(data.get("task") or "")
    role = str(data.get("role") or "")
    name = f"{role} : {task}" if role and task and not task.startswith(f"{role} :") else task
    result = data.get("res") or {}
    if kind == "playbook_on_play_start":
        return f"PLAY {data.get('play', '')}", "play"
    if kind == "runner_on_ok":
        state = "changed" if result.get("changed") else "ok"
        return f"{host}: {state}: {name}", state
    if kind == "runner_on_skipped":
        return f"{host}: skipped: {name}", "skipped"
    if kind == "runner_on_failed":
        if data.get("ignore_errors"):
            return f"{host}: failed (ignored): {name}: {failure_message(result)}", "ignored"
        return f"{host}: FAILED: {name}: {failure_message(result)}", "failed"
    if kind == "runner_on_unreachable":
        return f"{host}: UNREACHABLE: {name}: {failure_message(result)}", "failed"
    return None


def listener(log: Callable[[str], None], plain: bool) -> Callable[[str, Mapping[str, Any]], None]:
    """Every result into the run log; with plain output also to the terminal, line by line: plays and
    changed results (ok and skipped ones with -v), failures always (with --quiet too)."""
    verbose = console.verbosity() >= console.Verbosity.VERBOSE

    def listen(kind: str, data: Mapping[str, Any]) -> None:
        described = describe(kind, data)
        if described is None:
            return
        line, level = described
        log(line)
        if not plain:
            return
        if level == "failed":
            console.error(line)
        elif level == "play":
            console.step(line)
        elif level == "changed" or (verbose and level in ("ok", "skipped")):
            console.info(line)
        elif level == "ignored":
            console.detail(line)

    return listen


def end_table(hosts: list[HostState], title: str) -> None:
    rows = [
        [
            host.name,
            host.status,
            str(host.ok),
            str(host.changed),
            str(host.failed),
            str(host.unreachable),
            str(host.skipped),
            f"{host.duration_s:.1f}s",
        ]
        for host in hosts
    ]
    console.table(
        title, ["host", "status", "ok", "changed", "failed", "unreachable", "skipped", "time"], rows
    )
    failures = [(host.name, task) for host in hosts for task in host.failed_tasks]
    if failures:
        console.table(
            "Failed tasks",
            ["host", "task", "message"],
            [[name, task.task or "-", task.message] for name, task in failures],
        )
    versions = {host.name: host.versions for host in hosts if host.versions}
    if versions:
        components = sorted({key for found in versions.values() for key in found})
        console.table(
            "Versions verified by the roles",
            ["host", *components],
            [[name, *(str(found.get(c, "-")) for c in components)] for name, found in versions.items()],
        )
