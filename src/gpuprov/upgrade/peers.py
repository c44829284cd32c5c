"""A healthy peer for a one-host batch's gate: its all-reduce then crosses the network, as the issue's gate
asks ("the all-reduce against the threshold with a healthy peer"), instead of staying inside one host.

The peer is a host outside the batch that is in service and idle now (Slurm's state idle, no Slurm job, no
gpuprov job), preferably one that already runs the new lock (it passed its own gate in this rollout, or
needed no change). Before any host has moved, a host still on the old lock will do, but only when the batch
changes neither NCCL nor PyTorch: NCCL refuses a communicator whose ranks run different NCCL versions
("Mismatched NCCL version detected", ncclInvalidUsage: NVIDIA/nccl src/init.cc), and the all-reduce runs in
each host's own PyTorch. The gate's per-host checks run on the peer as well, but only what names a host of
the batch (its own checks, its pairs, the all-hosts all-reduce) counts against the batch.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuprov.upgrade import state
from gpuprov.upgrade.service import Service, state_of
from gpuprov.upgrade.state import Rollout

# Parts whose versions must agree across the all-reduce's ranks.
SAME_ON_BOTH = ("nccl", "pytorch")
IDLE = "idle"


def candidates(rollout: Rollout, batch: list[str]) -> list[tuple[str, str, str]]:
    """(host, node, why) in the order they are tried: on the new lock first, then (when the batch changes
    no part of SAME_ON_BOTH) hosts not upgraded yet; never a failed or administrator-drained host."""
    on_new = [(h, n, "already runs the new lock") for h, n in (rollout.data.get("unchanged") or {}).items()]
    waiting = []
    for host, entry in rollout.data["hosts"].items():
        if host in batch or entry.get("admin_drained"):
            continue
        if entry["phase"] == state.DONE:
            on_new.append((host, entry["node"], "upgraded, gate passed"))
        elif entry["phase"] == state.PENDING:
            waiting.append((host, entry["node"], "not upgraded yet"))
    changed = {
        part["component"]
        for host in batch
        for part in (rollout.host(host).get("changes") or {}).get("parts", [])
    }
    mixable = not changed & set(SAME_ON_BOTH)
    return on_new + (waiting if mixable else [])


SshJobs = Callable[[list[str]], dict[str, list[str]]]


def choose(
    rollout: Rollout, batch: list[str], service: Service, ssh_jobs: SshJobs
) -> tuple[str, str, str] | None:
    """The first candidate idle now: (host, node, why); None when there is none."""
    for host, node, why in candidates(rollout, batch):
        now = state_of(service, node)
        if now is None or now.state != IDLE or service.jobs(node) or ssh_jobs([host]):
            continue
        return host, node, why
    return None
