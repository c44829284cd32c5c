"""Speedup, scaling efficiency and the cross-node factor of a ladder of runs: pure arithmetic.

Weak scaling: every process keeps its batch, so ideal throughput grows with the process count.
- speedup(run) = img/s(run) / img/s(1 process)
- efficiency(run) = speedup(run) / processes(run)        (1.0 is perfect)
- cross-node factor = img/s(2 nodes) / img/s(1 node)      (2.0 is perfect; the guides' "1.98x over 4")
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rung:
    label: str  # "1 GPU", "1 node", "2 nodes" ...
    nodes: int
    processes: int
    img_s: float  # the median of the run's windows
    img_s_min: float
    img_s_max: float


@dataclass(frozen=True)
class Scaled:
    rung: Rung
    speedup: float | None  # None without a 1-process run to compare with
    efficiency: float | None


def spread(rung: Rung) -> float:
    """(max - min) / median of the windows: how steady the measurement was."""
    return (rung.img_s_max - rung.img_s_min) / rung.img_s if rung.img_s > 0 else 0.0


def scale(rungs: list[Rung]) -> list[Scaled]:
    base = next((r for r in rungs if r.processes == 1), None)
    rows = []
    for rung in rungs:
        if base is None or base.img_s <= 0:
            rows.append(Scaled(rung, None, None))
            continue
        speedup = rung.img_s / base.img_s
        rows.append(Scaled(rung, speedup, speedup / rung.processes))
    return rows


def cross_node_factor(rungs: list[Rung]) -> float | None:
    """img/s on 2 nodes over img/s on 1 node (all its processes); None when the ladder lacks either."""
    one = [r for r in rungs if r.nodes == 1]
    two = next((r for r in rungs if r.nodes == 2), None)
    if not one or two is None:
        return None
    node = max(one, key=lambda r: r.processes)  # the whole node, not its 1-GPU run
    return two.img_s / node.img_s if node.img_s > 0 else None
