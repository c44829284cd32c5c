"""The time a run has left, estimated from the last finished run like it: its per-role, per-host durations.

The prior: the newest run record (summary.json) of the same verb and playbook, with the same tags and check
mode, that ended ok, and holds the "roles" table timing.RoleClock recorded. A host it did not cover is
given, role by role, the slowest time any host took there.

Per host, each role's prior seconds are spread over its prior tasks: a role with 3 of its 9 tasks done has
two thirds of its prior time left. The hosts work at once, so the run has left what its slowest host has.
That is then scaled by how fast this run goes against the prior so far (a re-run that changes nothing is
far quicker than the first run that installed everything): the seconds this run took for the part done,
over the prior's seconds for that part. Without a prior (a first run) there is no estimate, and the line
says so; the next run estimates from this one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprov.ansible import runs
from gpuprov.ansible.timing import RoleClock

FIRST_RUN = "first run: no estimate yet (the next run estimates from this one)"
# Scale by this run's pace only once the part done was worth this share of the prior's time: before, the
# first tasks (facts, a package cache) say little about the rest.
MIN_SHARE_FOR_PACE = 0.05
PACE_RANGE = (0.05, 20.0)


@dataclass(frozen=True)
class RolePrior:
    """A role's time on a host in a finished run: in all, and task by task ({name: (seconds, times run)})."""

    seconds: float
    tasks: int
    by_task: Mapping[str, tuple[float, int]] = field(default_factory=dict)


Table = Mapping[str, Mapping[str, RolePrior]]  # host -> role -> its time


@dataclass(frozen=True)
class Prior:
    """A finished run's times, host by host and role by role."""

    run_id: str
    hosts: Table

    def for_host(self, host: str) -> Mapping[str, RolePrior]:
        """The host's own times; for a host the run did not cover, each role's slowest host's."""
        if host in self.hosts:
            return self.hosts[host]
        slowest: dict[str, RolePrior] = {}
        for roles in self.hosts.values():
            for role, spent in roles.items():
                if role not in slowest or spent.seconds > slowest[role].seconds:
                    slowest[role] = spent
        return slowest


def parse_table(table: Any) -> dict[str, dict[str, RolePrior]]:
    """summary.json's "roles" table ({host: {role: {seconds, tasks, by_task}}}); what does not parse is
    left out (a record is a file the user can edit)."""
    parsed: dict[str, dict[str, RolePrior]] = {}
    for host, roles in table.items() if isinstance(table, Mapping) else ():
        for role, spent in roles.items() if isinstance(roles, Mapping) else ():
            try:
                by_task = {str(k): (float(v[0]), int(v[1])) for k, v in (spent.get("by_task") or {}).items()}
                prior = RolePrior(float(spent["seconds"]), int(spent["tasks"]), by_task)
            except (AttributeError, KeyError, TypeError, ValueError, IndexError):
                continue
            if prior.tasks > 0 and all(n > 0 for _, n in by_task.values()):
                parsed.setdefault(str(host), {})[str(role)] = prior
    return parsed


def find_prior(match: Mapping[str, Any], current: str, root: Path | None = None) -> Prior | None:
    """The newest ok run whose summary has every key of `match` equal (verb, playbook name, tags, check)."""
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
        if any(summary.get(key) != value for key, value in match.items()):
            continue
        table = parse_table(summary.get("roles"))
        if table:
            return Prior(path.name, table)
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
class Estimator:
    """The estimate of a run in progress, from its RoleClock and the prior (None on a first run)."""

    clock: RoleClock
    hosts: list[str]
    prior: Prior | None
    started: float | None = None
    samples: list[tuple[float, float]] = field(default_factory=list)  # (elapsed, left) at each task start

    def progress(self, now: float) -> Progress:
        done = sum(t.tasks for h in self.hosts for t in self.clock.hosts.get(h, {}).values())
        roles = {h: (self.clock.running_on(h) or (self.clock.current.get(h, ""),))[0] for h in self.hosts}
        slowest = self.clock.slowest()
        if self.prior is None:
            return Progress(done, None, None, slowest, roles, FIRST_RUN)
        expected = sum(spent.tasks for h in self.hosts for spent in self.prior.for_host(h).values())
        left, done_prior = max((self._host_left(h, now) for h in self.hosts), default=(0.0, 0.0))
        total_prior = left + done_prior
        elapsed = now - self.started if self.started is not None else 0.0
        pace = 1.0
        if total_prior > 0 and done_prior >= MIN_SHARE_FOR_PACE * total_prior and elapsed > 0:
            pace = min(max(elapsed / done_prior, PACE_RANGE[0]), PACE_RANGE[1])
        basis = f"from run {self.prior.run_id}"
        return Progress(done, expected, left * pace, slowest, roles, basis)

    def _host_left(self, host: str, now: float) -> tuple[float, float]:
        """(prior seconds left, prior seconds done) on host, task by task: a task that ran is done, the one
        running is done up to its prior time."""
        left = done = 0.0
        spent = self.clock.hosts.get(host, {})
        running = self.clock.running_on(host)
        for role, prior in self.prior.for_host(host).items() if self.prior else ():
            this = spent.get(role)
            # A record without task times: the role's time spread evenly over its tasks.
            tasks = prior.by_task or {"": (prior.seconds, prior.tasks)}
            for task, (seconds, times) in tasks.items():
                if prior.by_task:
                    ran = int(this.by_task[task][1]) if this and task in this.by_task else 0
                else:
                    ran = this.tasks if this else 0
                share = seconds * min(ran, times) / times
                if running is not None and running[0] == role and running[1] in (task, "") and ran < times:
                    share += min(seconds / times, self.clock.elapsed_in_task(now))
                left += seconds - share
                done += share
        return left, done

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
