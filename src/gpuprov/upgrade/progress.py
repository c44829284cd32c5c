"""What the rollout says as it goes: a line per step on the console, or one JSON object per line on stdout
with --json (`{"event": "phase", "hosts": [...], "phase": "applying", ...}`), and the time left: the mean
time of this rollout's batches done, per batch left; before the first, each batch left's estimate from
earlier rollouts' records or a guess (estimate.py), and the line says which.
"""

from __future__ import annotations

import json
import time
from typing import Any

from gpuprov import console
from gpuprov.upgrade import state


class Reporter:
    def __init__(
        self,
        as_json: bool,
        batches_total: int,
        rollout_id: str,
        expected: tuple[list[float], str] = ([], ""),  # each batch's estimate, and what it rests on
    ) -> None:
        self.as_json = as_json
        self.total = batches_total
        self.id = rollout_id
        self.durations: list[float] = []
        self.left = batches_total
        self.expected, self.basis = expected
        self.events: list[dict[str, Any]] = []

    def _event(self, kind: str, text: str, **data: Any) -> None:
        record = {"event": kind, "rollout": self.id, "time": round(time.time(), 1), **data}
        self.events.append(record)
        if self.as_json:
            console.result(json.dumps(record))
        elif kind in ("failed", "stopped", "killing"):
            console.warning(text)
        elif kind in ("done", "finished"):
            console.success(text)
        else:
            console.step(text)

    def eta(self) -> tuple[float | None, str]:
        """The time left (batches left, the current one included) and what it rests on."""
        if self.durations:
            return sum(self.durations) / len(self.durations) * self.left, "from this rollout's batches"
        if len(self.expected) >= self.total and self.left:
            return sum(self.expected[self.total - self.left :]), self.basis
        return None, ""

    def batch(self, number: int, total: int, hosts: list[str]) -> None:
        self.left = max(0, total - number + 1)  # resumed: the batches before were done earlier
        eta, basis = self.eta()
        left = f"; about {eta / 60:.0f} min left ({basis})" if eta is not None else ""
        self._event(
            "batch",
            f"Batch {number}/{total}: {', '.join(hosts)}{left}",
            batch=number,
            total=total,
            hosts=hosts,
            eta_s=None if eta is None else round(eta),
            eta_basis=basis or None,
        )

    def batch_done(self, number: int, seconds: float, failed: list[str]) -> None:
        self.durations.append(seconds)
        self.left = max(0, self.total - number)
        self._event(
            "batch_done", f"Batch {number} took {seconds:.0f} s", batch=number, seconds=round(seconds, 1),
            failed=failed,
        )  # fmt: skip

    def phase(self, hosts: list[str], phase: str) -> None:
        words = {
            state.DRAINING: "taking out of service",
            state.APPLYING: "applying the new lock (bootstrap, this batch only)",
            state.GATING: "gate: gpuprov check with the new lock",
        }
        self._event("phase", f"{', '.join(hosts)}: {words.get(phase, phase)}", hosts=hosts, phase=phase)

    def waiting(self, busy: dict[str, list[str]], left_s: float) -> None:
        jobs = "; ".join(f"{host}: {', '.join(found)}" for host, found in busy.items())
        self._event(
            "waiting", f"Waiting for jobs to end ({jobs}); up to {left_s:.0f} s more", busy=busy,
            left_s=round(left_s),
        )  # fmt: skip

    def killing(self, host: str, jobs: list[str]) -> None:
        text = f"{host}: --kill-jobs: cancelling {', '.join(jobs)} (still running at --drain-timeout)"
        self._event("killing", text, host=host, jobs=jobs)

    def note(self, host: str, text: str) -> None:
        self._event("note", f"{host}: {text}", host=host, note=text)

    def failed(self, host: str, why: str) -> None:
        self._event("failed", f"{host}: failed, left out of service: {why}", host=host, reason=why)

    def done(self, host: str, *, back: bool) -> None:
        where = "back in service" if back else "kept out of service as its administrator left it"
        self._event("done", f"{host}: upgraded, gate passed, {where}", host=host, in_service=back)

    def stopped(self, reason: str, failures: list[str]) -> None:
        self._event("stopped", f"Rollout stopped: {reason}", reason=reason, failed=failures)

    def finished(self, rollout: state.Rollout) -> None:
        hosts = rollout.data["hosts"]
        moved = [h for h, e in hosts.items() if e["phase"] == state.DONE]
        self._event("finished", f"Rollout {self.id} finished: {len(moved)} host(s) upgraded", hosts=moved)
