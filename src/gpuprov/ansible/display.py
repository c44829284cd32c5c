"""How an Ansible run looks in the terminal: live progress, then tables. Output goes through gpuprov.console.

On a terminal: a live table, one row per host (current task, ok/changed/failed counts). Without a terminal
(CI logs) or with --quiet: plain lines, one per noteworthy result, so logs read top to bottom.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.table import Table

from gpuprov import console
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

    def __init__(self, tracker: Tracker, title: str) -> None:
        self.tracker = tracker
        self.title = title

    def __rich__(self) -> Table:
        grid = Table(title=self.title, title_justify="left", expand=False)
        for column in ("host", "status", "ok", "changed", "failed", "skipped", "current task"):
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
                task,
                style=None,
            )
        return grid


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
