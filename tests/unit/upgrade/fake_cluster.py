"""A Slurm cluster in memory for the rollout's tests: nodes with a state, a reason and jobs; jobs end when
the fake clock passes their end. It does what scontrol does: DRAIN keeps jobs running (draining, then
drained), RESUME clears the drain and its reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprov.upgrade import rollout, service, state
from gpuprov.upgrade.progress import Reporter


@dataclass
class Node:
    state: str = "idle"
    reason: str = ""
    responding: bool = True
    jobs: dict[str, float] = field(default_factory=dict)  # job id -> when it ends (fake clock)


class FakeSlurm:
    def __init__(self, names: Sequence[str]) -> None:
        self.nodes = {name: Node() for name in names}
        self.now = 0.0
        self.log: list[str] = []
        self.stubborn: set[str] = set()  # jobs scancel does not end (a process stuck in D state)
        # What a RESUME leaves a node as, for the nodes Slurm does not take back (slurmd dead: "idle*").
        self.after_resume: dict[str, tuple[str, str, bool]] = {}
        # Nodes that stay "draining" after their drain until this time, with nothing in squeue's states
        # (a stopped or stage-out job, an epilog still running).
        self.draining_until: dict[str, float] = {}

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def states(self, nodes: Sequence[str]) -> dict[str, service.NodeState]:
        return {n: self._state(n) for n in nodes}

    def _state(self, name: str) -> service.NodeState:
        node = self.nodes[name]
        shown = (
            "draining"
            if node.state == "drained" and self.now < self.draining_until.get(name, 0)
            else node.state
        )
        return service.NodeState(shown, node.reason, node.responding)

    def drain(self, node: str, reason: str) -> None:
        self.log.append(f"drain {node}")
        self.nodes[node].state, self.nodes[node].reason = "drained", reason

    def jobs(self, node: str) -> list[str]:
        live = {job: end for job, end in self.nodes[node].jobs.items() if end > self.now}
        self.nodes[node].jobs = live
        return sorted(live)

    def cancel(self, jobs: Sequence[str]) -> None:
        """scancel: the jobs end (at once here; `stubborn` ones never do)."""
        self.log.append(f"scancel {' '.join(jobs)}")
        for node in self.nodes.values():
            node.jobs = {
                job: end for job, end in node.jobs.items() if job not in jobs or job in self.stubborn
            }

    def resume(self, node: str) -> None:
        self.log.append(f"resume {node}")
        state, reason, responding = self.after_resume.get(node, ("idle", "", True))
        self.nodes[node].state, self.nodes[node].reason, self.nodes[node].responding = (
            state,
            reason,
            responding,
        )


class Work:
    """The apply and gate steps, recorded; `fail_gate` names hosts whose gate fails, `interrupt_at` a host
    whose apply raises KeyboardInterrupt once (Ctrl-C mid-batch)."""

    def __init__(self, cluster: FakeSlurm) -> None:
        self.cluster = cluster
        self.applied: list[list[str]] = []
        self.gated: list[list[str]] = []
        self.peers: list[list[str]] = []
        self.fail_gate: set[str] = set()
        self.interrupt_at: str | None = None

    def apply(self, names: list[str]) -> dict[str, str]:
        if self.interrupt_at in names:
            self.interrupt_at = None
            raise KeyboardInterrupt
        for name in names:  # a job never runs on a node while it is applied
            assert not self.cluster.jobs(name), name
            assert self.cluster.nodes[name].state.startswith("drain"), name
        self.applied.append(list(names))
        return {}

    def gate(self, names: list[str], peers: list[str]) -> dict[str, str]:
        self.gated.append(list(names))
        self.peers.append(list(peers))
        return {n: "cuda: 12.4.1 installed, the lock says 12.6.3" for n in names if n in self.fail_gate}


def new_rollout(
    directory: Path, batches: list[list[str]], cluster: FakeSlurm, canary: bool = True
) -> state.Rollout:
    hosts: dict[str, Any] = {}
    for number, batch in enumerate(batches, start=1):
        for name in batch:
            node = cluster.nodes[name]
            admin = node.state.startswith("drain")
            hosts[name] = {
                "phase": state.PENDING, "batch": number, "node": name, "drained_by_us": False,
                "admin_drained": admin, "admin_reason": node.reason if admin else None, "error": None,
            }  # fmt: skip
    data = {"id": "r1", "plan": batches, "canary": canary, "status": "running", "hosts": hosts, "lock": {}}
    directory.mkdir(parents=True, exist_ok=True)
    return state.Rollout(directory, data)


def steps(cluster: FakeSlurm, work: Work, **extra: Any) -> rollout.Steps:
    return rollout.Steps(
        service=cluster,
        apply=work.apply,
        gate=work.gate,
        ssh_jobs=lambda names: {},
        drain_timeout_s=extra.pop("drain_timeout_s", 3600.0),
        max_failures=extra.pop("max_failures", 1),
        sleep=cluster.sleep,
        clock=cluster.clock,
        **extra,
    )


def reporter() -> Reporter:
    return Reporter(as_json=False, batches_total=0, rollout_id="r1")
