"""The time a run has left, estimated from the last finished run like it: each host's tasks, in order, with
their times and whether they changed something.

The prior: the newest run record (summary.json) of the same verb and playbook, with the same tags and check
mode and the same inventory file, that ended ok, with the "timeline" timing.RoleClock recorded for every host
of this run: a 2-host sandbox run, or a `--limit node1` run, says little about 64 real hosts.

Each host finds its place in the prior's tasks: every task it runs is looked for there after the last one
found (a task the prior did not run is passed over; the prior's tasks passed by, on another branch, are done).
What is left is the prior's remaining tasks, each costed from this run's own pace so far:

- a task that changed nothing then is expected to take its time then x this run's pace on such tasks (the
  seconds the tasks matched so far took now over what they took then: a loaded machine runs slower);
- a task that changed something then (a package installed) is what a first run spends most of its time on,
  and what a re-run of the same hosts skips: it is expected to change again in the share that the matched
  ones did (its time then x the pace), and otherwise to cost what this run's tasks that changed nothing
  take on average.

Without a prior (a first run, or no run of these hosts) there is no estimate, and the line says so; the
next run of these hosts estimates from this one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprov.ansible import runs
from gpuprov.ansible.timing import RoleClock

FIRST_RUN = "no comparable run: no estimate yet (the next run of these hosts estimates from this one)"
# This run's pace counts once the tasks matched so far took this long then: the first few say little.
MIN_MATCHED_S = 2.0
PACE_RANGE = (0.2, 5.0)


Task = tuple[str, str, float, bool]  # role, task name, seconds, changed something


@dataclass(frozen=True)
class Prior:
    """A finished run's tasks, host by host, in the order they ran."""

    run_id: str
    hosts: Mapping[str, list[Task]]

    def for_host(self, host: str) -> list[Task]:
        """The host's own tasks; for a host the run did not cover (find_prior picks none such for a run, but
        a record's timeline can lack a host), those of its slowest host."""
        if host in self.hosts:
            return self.hosts[host]
        return max(self.hosts.values(), key=lambda tasks: sum(t[2] for t in tasks), default=[])


def parse_timeline(timeline: Any) -> dict[str, list[Task]]:
    """summary.json's "timeline" ({host: [[role, task, seconds, changed], ...]}); a host whose list does not
    parse is left out (a record is a file the user can edit)."""
    parsed: dict[str, list[Task]] = {}
    for host, tasks in timeline.items() if isinstance(timeline, Mapping) else ():
        try:
            parsed[str(host)] = [(str(r), str(t), max(0.0, float(s)), bool(c)) for r, t, s, c in tasks]
        except (TypeError, ValueError):
            continue
    return {host: tasks for host, tasks in parsed.items() if tasks}


def find_prior(
    match: Mapping[str, Any], current: str, hosts: Collection[str] = (), root: Path | None = None
) -> Prior | None:
    """The newest ok run whose summary has every key of `match` equal (verb, playbook, tags, check; a key
    the record lacks, such as an older record's inventory, is not held against it) and whose timeline
    covers every one of `hosts`."""
    root = root or runs.runs_dir()
    if not root.is_dir():
        return None
    for path in sorted((p for p in root.iterdir() if p.is_dir() and p.name != current), reverse=True):
        try:
            summary = json.loads((path / runs.SUMMARY).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(summary, dict) or summary.get("status") != "ok":
            continue
        if any(key in summary and summary[key] != value for key, value in match.items()):
            continue
        timeline = parse_timeline(summary.get("timeline"))
        if timeline and set(hosts) <= timeline.keys():
            return Prior(path.name, timeline)
    return None


@dataclass(frozen=True)
class Progress:
    """Where a run stands: what the live line and the plain lines say."""

    done: int  # tasks done, all hosts together
    expected: int | None  # tasks the prior ran on these hosts; None on a first run
    left_s: float | None  # None: no estimate (a first run, or nothing done yet)
    slowest: str | None
    roles: Mapping[str, str]  # host -> the role it is in
    basis: str  # where the estimate comes from

    def line(self) -> str:
        if self.expected:
            expected = max(self.expected, self.done)
            share = self.done * 100 // expected
            tasks = f"{self.done}/{expected} tasks done ({share}%), {expected - self.done} left"
        else:
            tasks = f"{self.done} tasks done"
        parts = [tasks]
        if self.slowest:
            parts.append(f"slowest host: {self.slowest}")
        if self.left_s is not None:
            parts.append(f"about {duration(self.left_s)} left ({self.basis})")
        else:
            parts.append(self.basis)
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tasks_done": self.done,
            "tasks_expected": self.expected,
            "left_s": None if self.left_s is None else round(self.left_s, 1),
            "slowest_host": self.slowest,
            "estimate_from": self.basis,
        }


@dataclass
class _Place:
    """Where a host is in the prior's tasks, and this run's pace against them so far."""

    seen: int = 0  # tasks of this run looked up
    index: int = 0  # the prior's tasks before this one are done
    then_s: float = 0.0  # matched tasks that changed nothing then: their seconds then
    now_s: float = 0.0  # ... and now
    changed_then: int = 0  # matched tasks that changed something then
    changed_again: int = 0  # ... and changed something again now
    idle_n: int = 0  # this run's tasks that changed nothing
    idle_s: float = 0.0  # ... and their seconds

    def add(self, then: Task | None, seconds: float, changed: bool) -> None:
        if not changed:
            self.idle_n += 1
            self.idle_s += seconds
        if then is None:
            return
        if then[3]:
            self.changed_then += 1
            self.changed_again += changed
        else:
            self.then_s += then[2]
            self.now_s += seconds

    def cost(self, then: Task) -> float:
        """What a prior task is expected to take in this run."""
        pace = self.now_s / self.then_s if self.then_s >= MIN_MATCHED_S else 1.0
        pace = min(max(pace, PACE_RANGE[0]), PACE_RANGE[1])
        if not then[3] or not self.changed_then or not self.idle_n:
            return then[2] * pace
        again = self.changed_again / self.changed_then
        return again * then[2] * pace + (1 - again) * self.idle_s / self.idle_n


@dataclass
class Estimator:
    """The estimate of a run in progress, from its RoleClock and the prior (None on a first run)."""

    clock: RoleClock
    hosts: list[str]
    prior: Prior | None
    started: float | None = None
    samples: list[tuple[float, float]] = field(default_factory=list)  # (elapsed, left) at each task start
    _places: dict[str, _Place] = field(default_factory=dict)
    # The live display redraws from a thread of its own while events come in: one reader at a time.
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def progress(self, now: float) -> Progress:
        with self._lock:
            return self._progress(now)

    def _progress(self, now: float) -> Progress:
        done = sum(t.tasks for h in self.hosts for t in self.clock.hosts.get(h, {}).values())
        roles = {h: (self.clock.running_on(h) or (self.clock.current.get(h, ""),))[0] for h in self.hosts}
        slowest = self.clock.slowest()
        if self.prior is None:
            return Progress(done, None, None, slowest, roles, FIRST_RUN)
        expected = sum(len(self.prior.for_host(h)) for h in self.hosts)
        left = max((self._host_left(h, now) for h in self.hosts), default=0.0)
        return Progress(done, expected, left, slowest, roles, f"from run {self.prior.run_id}")

    def _host_left(self, host: str, now: float) -> float:
        """The seconds host has left: the prior's tasks after its place, each at its cost; the running
        task less the time it has run."""
        prior = self.prior.for_host(host) if self.prior else []
        place = self._places.setdefault(host, _Place())
        ran = self.clock.timeline.get(host, [])
        for role, task, seconds, changed in ran[place.seen :]:
            found = _find(prior, place.index, role, task)
            place.add(prior[found] if found is not None else None, seconds, changed)
            if found is not None:
                place.index = found + 1
        place.seen = len(ran)
        start = place.index
        running = self.clock.running_on(host)
        found = _find(prior, start, *running) if running is not None else None
        if found is not None:  # the tasks passed by are done; the running one, up to its cost
            cost = place.cost(prior[found])
            return cost - min(cost, self.clock.elapsed_in_task(now)) + self._cost(place, prior[found + 1 :])
        return self._cost(place, prior[start:])

    @staticmethod
    def _cost(place: _Place, tasks: list[Task]) -> float:
        return sum(place.cost(task) for task in tasks)

    def observe(self, kind: str, now: float) -> None:
        """Called after the clock saw the event: the run's start, and a sample at each task's start."""
        if self.started is None and kind.startswith("playbook_on_"):
            self.started = now
        if kind == "playbook_on_task_start" and self.started is not None:
            left = self.progress(now).left_s
            if left is not None:
                self.samples.append((now - self.started, left))

    def accuracy(self, now: float) -> dict[str, Any] | None:
        """The estimate made at the run's halfway point against the time that was in fact left."""
        if not self.samples or self.started is None:
            return None
        total = now - self.started
        elapsed, estimated = min(self.samples, key=lambda sample: abs(sample[0] - total / 2))
        actual = total - elapsed
        return {
            "elapsed_s": round(elapsed, 1),
            "left_estimated_s": round(estimated, 1),
            "left_actual_s": round(actual, 1),
            "error": round((estimated - actual) / actual, 3) if actual > 0 else None,
        }


def duration(seconds: float) -> str:
    """12s, 3m 05s, 1h 02m."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def _find(tasks: list[Task], start: int, role: str, task: str) -> int | None:
    """The index of the first task named so in role from start on, or None."""
    for index in range(start, len(tasks)):
        if tasks[index][0] == role and tasks[index][1] == task:
            return index
    return None
