"""What a run did, host by host, folded from ansible-runner's events.

The tracker keeps, per host: the task it is on, ok/changed/failed/skipped/unreachable counts, the tasks that
failed with their message, and the versions the roles verified. Roles publish versions in either of two ways:

- `ansible.builtin.set_fact: gpuprov_verified: {driver: "550.127.08"}` (merged across tasks per host), or
- `ansible.builtin.set_stats: data: {gpuprov_verified: {"{{ inventory_hostname }}": {cuda: "12.4.1"}}}`.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuprov.ansible.timing import RoleClock

VERSIONS_KEY = "gpuprov_verified"
MESSAGE_LIMIT = 400


@dataclass
class FailedTask:
    task: str
    message: str
    unreachable: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "message": self.message, "unreachable": self.unreachable}


@dataclass
class HostState:
    name: str
    task: str = ""
    ok: int = 0  # tasks that succeeded, changed or not (as Ansible counts them)
    changed: int = 0
    failed: int = 0
    skipped: int = 0
    unreachable: int = 0
    rescued: int = 0
    ignored: int = 0
    finished: bool = False
    first_event: float | None = None
    last_event: float | None = None
    failed_tasks: list[FailedTask] = field(default_factory=list)
    versions: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        if self.changed:
            return "changed"
        if self.ok or self.skipped:
            return "ok"
        return "pending"

    @property
    def duration_s(self) -> float:
        if self.first_event is None or self.last_event is None:
            return 0.0
        return round(self.last_event - self.first_event, 2)

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "ok": self.ok,
            "changed": self.changed,
            "failed": self.failed,
            "unreachable": self.unreachable,
            "skipped": self.skipped,
            "rescued": self.rescued,
            "ignored": self.ignored,
            "duration_s": self.duration_s,
            "failed_tasks": [task.as_dict() for task in self.failed_tasks],
            "versions": dict(sorted(self.versions.items())),
        }


class Tracker:
    """Folds runner events into HostStates; `handle` is runner's event_handler."""

    def __init__(self, host_names: list[str]) -> None:
        self.targets = list(host_names)
        self.hosts: dict[str, HostState] = {name: HostState(name) for name in host_names}
        self.play = ""
        self.task = ""
        self.stats_seen = False
        self.listeners: list[Any] = []
        self.clock = RoleClock()  # each role's time on each host: the run record estimates read
        self.now = time.time()  # when the latest event happened (its own timestamp)

    def host(self, name: str) -> HostState:
        if name not in self.hosts:  # a host the playbook added (add_host, delegate_to)
            self.hosts[name] = HostState(name)
        return self.hosts[name]

    def handle(self, event: Mapping[str, Any]) -> bool:
        kind = str(event.get("event", ""))
        data = event.get("event_data") or {}
        self.now = event_time(event)
        try:
            self.clock.observe(kind, data, self.now)
            self._fold(kind, data)
        finally:
            for listener in self.listeners:
                listener(kind, data)
        return True  # keep the event in runner's artifacts

    def _fold(self, kind: str, data: Mapping[str, Any]) -> None:
        now = time.monotonic()
        if kind == "playbook_on_play_start":
            self.play = str(data.get("play", ""))
            return
        if kind == "playbook_on_task_start":
            self.task = _task_name(data)
            return
        if kind == "playbook_on_stats":
            self._stats(data)
            return
        host_name = data.get("host")
        if not host_name or not kind.startswith("runner_on_"):
            return
        host = self.host(str(host_name))
        host.first_event = host.first_event or now
        host.last_event = now
        task = _task_name(data)
        result = data.get("res") or {}
        if kind == "runner_on_start":
            host.task = task
        elif kind == "runner_on_ok":
            host.ok += 1
            if result.get("changed"):
                host.changed += 1
            self._versions(host, result)
        elif kind == "runner_on_failed":
            if data.get("ignore_errors"):
                host.ignored += 1
            else:
                host.failed += 1
                host.failed_tasks.append(FailedTask(task, failure_message(result)))
        elif kind == "runner_on_skipped":
            host.skipped += 1
        elif kind == "runner_on_unreachable":
            host.unreachable += 1
            host.failed_tasks.append(FailedTask(task, failure_message(result), unreachable=True))

    def _versions(self, host: HostState, result: Mapping[str, Any]) -> None:
        facts = result.get("ansible_facts") or {}
        published = facts.get(VERSIONS_KEY) if isinstance(facts, Mapping) else None
        if isinstance(published, Mapping):
            host.versions.update({str(k): v for k, v in published.items()})

    def _stats(self, data: Mapping[str, Any]) -> None:
        """The end-of-play totals are Ansible's own count: they replace the live ones."""
        self.stats_seen = True
        columns = {
            "ok": "ok",
            "changed": "changed",
            "failures": "failed",
            "dark": "unreachable",
            "skipped": "skipped",
            "rescued": "rescued",
            "ignored": "ignored",
        }
        for stat, attribute in columns.items():
            for name, count in (data.get(stat) or {}).items():
                setattr(self.host(str(name)), attribute, int(count))
        for name in data.get("processed") or {}:
            self.host(str(name)).finished = True
        custom = (data.get("artifact_data") or {}).get(VERSIONS_KEY)
        if isinstance(custom, Mapping):
            for name, versions in custom.items():
                if isinstance(versions, Mapping) and str(name) in self.hosts:
                    self.host(str(name)).versions.update({str(k): v for k, v in versions.items()})


def event_time(event: Mapping[str, Any]) -> float:
    """When runner made the event (its "created" stamp), in seconds since the epoch; now if it has none."""
    try:
        return datetime.datetime.fromisoformat(str(event["created"])).timestamp()
    except (KeyError, ValueError):
        return time.time()


def _task_name(data: Mapping[str, Any]) -> str:
    name = str(data.get("task") or data.get("name") or "").strip()
    role = str(data.get("role") or "").strip()
    if role and name and not name.startswith(f"{role} :"):
        return f"{role} : {name}"
    return name


def failure_message(result: Mapping[str, Any]) -> str:
    """What went wrong, in words: the module's msg, the command's last error line, a failed loop item."""
    parts: list[str] = []
    message = result.get("msg")
    if message:
        parts.append(str(message).strip())
    failures = result.get("failures")  # the package modules list what went wrong here (dnf: "No package x")
    if isinstance(failures, list) and failures:
        parts.append(", ".join(str(failure).strip() for failure in failures[:3]))
    if ("rc" in result and not failures) or not parts:  # a command, or a module that died: its last line
        for stream in ("stderr", "module_stderr", "stdout", "module_stdout"):
            lines = [line for line in str(result.get(stream) or "").splitlines() if line.strip()]
            if lines:
                parts.append(f"{stream}: {lines[-1].strip()}")
                break
    if "rc" in result and result.get("rc") not in (0, None):
        parts.append(f"rc={result['rc']}")
    for item in result.get("results") or []:
        if isinstance(item, Mapping) and item.get("failed"):
            label = item.get("item")
            parts.append(f"item {label!r}: {failure_message(item)}")
            break
    if not parts:
        parts.append("failed (no message; see the run log)")
    text = " ".join("; ".join(part.rstrip(".;") for part in parts).split())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."
