"""How long each role took on each host, folded from runner's events: the run record an estimate reads.

Ansible starts one task at a time on every host it applies to (the linear strategy), so a task's time is
the span from its start to the next task's start (or the end of the play): the controller's own work
between tasks included, which a module's own duration leaves out. Each host that ran the task (skipped
or not) is charged that span in the task's role; tasks outside any role count under PLAY_TASKS.

A role can come back later in a run (nvidia_repository is a dependency of several roles): its times add
up. A host "finishes" a role when its next task belongs to another role (or the play ends); plain output
prints one line for each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PLAY_TASKS = "(play tasks)"  # tasks of a play that are not in a role (the inventory's checks, say)
_RESULTS = ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable")


@dataclass
class RoleTime:
    seconds: float = 0.0
    tasks: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 2), "tasks": self.tasks}


@dataclass(frozen=True)
class Finished:
    """A host's stretch of tasks in one role, just ended."""

    host: str
    role: str
    seconds: float
    tasks: int


@dataclass
class _Slot:
    role: str
    task: str
    started: float
    hosts: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)


class RoleClock:
    """Per host, per role: seconds and tasks so far. `observe` is fed every event with its time."""

    def __init__(self) -> None:
        self.hosts: dict[str, dict[str, RoleTime]] = {}
        self.current: dict[str, str] = {}  # host -> the role of its latest task
        self.finished: list[Finished] = []  # taken by whoever shows them (display's plain lines)
        self._slot: _Slot | None = None
        self._stretch: dict[str, Finished] = {}  # host -> its stretch in the current role so far
        # host -> (role, task, seconds, changed) of every task in the order it ran: what an estimate reads
        self.timeline: dict[str, list[tuple[str, str, float, bool]]] = {}
        self.busy: dict[str, float] = {}  # host -> seconds its modules ran (the host the others wait for)

    def observe(self, kind: str, data: Mapping[str, Any], now: float) -> None:
        if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self._close(now)
            self._slot = _Slot(str(data.get("role") or PLAY_TASKS), str(data.get("task") or ""), now)
        elif kind in ("playbook_on_play_start", "playbook_on_stats"):
            self._close(now)
            if kind == "playbook_on_stats":
                for host in list(self._stretch):
                    self._end_stretch(host)
        elif kind == "runner_on_start" and self._slot is not None and data.get("host"):
            self._slot.hosts.add(str(data["host"]))
        elif kind in _RESULTS and data.get("host"):
            host = str(data["host"])
            if self._slot is not None and (data.get("res") or {}).get("changed"):
                self._slot.changed.add(host)
            self.busy[host] = self.busy.get(host, 0.0) + _number(data.get("duration"))

    def slowest(self) -> str | None:
        """The host whose tasks ran longest so far: the one the others wait for."""
        host = max(self.busy, key=lambda name: self.busy[name], default=None)
        return host if host is not None and self.busy[host] > 0 else None  # no task timed yet: none

    def elapsed_in_task(self, now: float) -> float:
        """Seconds since the running task started (0 between tasks)."""
        return now - self._slot.started if self._slot is not None else 0.0

    def running_on(self, host: str) -> tuple[str, str] | None:
        """The role and the name of the task running now on host, if one is."""
        slot = self._slot
        return (slot.role, slot.task) if slot is not None and host in slot.hosts else None

    def table(self) -> dict[str, dict[str, dict[str, Any]]]:
        """{host: {role: {seconds, tasks}}}, for summary.json."""
        return {host: {role: t.as_dict() for role, t in roles.items()} for host, roles in self.hosts.items()}

    def timelines(self) -> dict[str, list[list[Any]]]:
        """{host: [[role, task, seconds, changed], ...]} in the order the tasks ran, for summary.json."""
        return {
            host: [[role, task, round(seconds, 2), changed] for role, task, seconds, changed in tasks]
            for host, tasks in self.timeline.items()
        }

    def _close(self, now: float) -> None:
        slot, self._slot = self._slot, None
        if slot is None:
            return
        span = max(0.0, now - slot.started)
        for host in sorted(slot.hosts):
            spent = self.hosts.setdefault(host, {}).setdefault(slot.role, RoleTime())
            spent.seconds += span
            spent.tasks += 1
            self.timeline.setdefault(host, []).append((slot.role, slot.task, span, host in slot.changed))
            if self.current.get(host) not in (None, slot.role):
                self._end_stretch(host)
            self.current[host] = slot.role
            before = self._stretch.get(host) or Finished(host, slot.role, 0.0, 0)
            self._stretch[host] = Finished(host, slot.role, before.seconds + span, before.tasks + 1)

    def _end_stretch(self, host: str) -> None:
        stretch = self._stretch.pop(host, None)
        if stretch is not None:
            self.finished.append(stretch)


def _number(value: Any) -> float:
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return 0.0
