"""All-reduce bus bandwidth across the hosts, run through gpuprov's own launch (onhost/allreduce.py under
torchrun), NCCL's ring algorithm forced (`NCCL_ALGO=Ring`) on one or two hosts and in the pairs job: the
thresholds are ring figures, and on two hosts NCCL's tree or NVLS can exceed the network's bottleneck
(NVIDIA/nccl-tests#160, #196); on more hosts NCCL chooses (ring_for).

Reported as the median bus bandwidth of several repetitions with its spread (min-max). The threshold comes
from the inventory (`gpuprov_check_min_busbw_gbps`), else, for NCCL, from the hardware (busbw_threshold.py):
the hosts' network, or on one host how its GPUs are joined. Where none derives, NCCL's figure is shown and
the check says it could not judge (a warning, never a pass); gloo on CPU is measured, not judged. One host is
measured only when it has GPUs to join. When the all-hosts figure misses the threshold, host pairs are
measured in one more job: each host with its two neighbours in inventory order (a ring of pairs), the pairs
that share no host at once, and a host whose every pair misses is named.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuprov import console, onhost
from gpuprov.check import busbw_threshold as threshold_mod
from gpuprov.check import expected
from gpuprov.check.gather import Gathered
from gpuprov.check.results import Result, Status, verdict
from gpuprov.errors import GpuprovError
from gpuprov.launch import api as launch

SCRIPT = onhost.path("allreduce.py")
MARK = "GPUPROV_ALLREDUCE "
THRESHOLD_VAR = threshold_mod.INVENTORY_VAR
FORMULA = "busbw = algbw x 2(n-1)/n (nccl-tests doc/PERFORMANCE.md)"
RING = ("--ring",)  # onhost/allreduce.py: NCCL_ALGO=Ring
RING_HOSTS = 2  # past two hosts NCCL chooses: a ring's latency term grows with the ranks (tuning.cc)


def ring_for(hosts: int) -> tuple[str, ...]:
    """The ring on one or two hosts, where the bars are ring figures and NCCL's tree or NVLS could exceed
    the network's bottleneck; NCCL's own choice beyond, where a forced ring of 1 GiB falls under the bar
    from its latency alone (about 270 GB/s at 32 8-GPU nodes against ~350 at 8: NCCL's cost model)."""
    return RING if hosts <= RING_HOSTS else ()


def measure(
    inventory: Path, names: list[str], image: str | None = None, args: tuple[str, ...] = RING
) -> dict[str, Any]:
    """Run the all-reduce on these hosts (inside image, when given); its report (backend, world, bytes,
    seconds per repetition; with `--rounds`, each host pair's)."""
    # stdout carries only what check is asked for (--json); the result line is read from the log, not shown
    with console.job_lines_on_stderr(), console.protocol_lines_hidden(MARK):
        job_id = launch.run_job(SCRIPT, inventory, names, image=image, script_args=args)
    log = launch.job_log(job_id, names[0])
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if MARK in line:
            report: dict[str, Any] = json.loads(line.split(MARK, 1)[1])
            return report
    raise GpuprovError(f"the all-reduce job {job_id} printed no result (log: {log})")


def busbw_gbps(report: Mapping[str, Any], pair: str = "") -> list[float]:
    """Bus bandwidth of each repetition in GB/s (10^9 bytes per second); of one host pair's, when named."""
    n = int(report["pair_ranks"][pair] if pair else report["world"])
    factor = 2 * (n - 1) / n if n > 1 else 1.0
    seconds = report["pairs"][pair] if pair else report["seconds"]
    return [float(report["bytes"]) / t / 1e9 * factor for t in seconds if t > 0]


def _summary(values: list[float]) -> tuple[float, str]:
    median = statistics.median(values)
    return median, f"{min(values):.3f}-{max(values):.3f}"


def judged(
    where: str, values: list[float], threshold: threshold_mod.Threshold, detail: str = "", action: str = ""
) -> Result:
    """One measurement against the threshold: pass, or fail with the action given."""
    median, spread = _summary(values)
    return verdict(
        "bandwidth",
        where,
        median >= threshold.gbps,
        measured=f"{median:.3f} (spread {spread})",
        expected=f">= {threshold.gbps:g}",
        unit="GB/s busbw",
        source=threshold.source,
        margin=f"{(median - threshold.gbps) / threshold.gbps * 100:+.0f}%",
        detail=detail,
        action=action,
    )


def hardware_threshold(
    found: list[Gathered], gpus_per_host: int
) -> threshold_mod.Threshold | threshold_mod.NoBar:
    if len(found) == 1:  # within a host NCCL's traffic goes over NVLink or PCIe, not the network
        return threshold_mod.one_host(found[0].host.name, found[0].data)

    def rate(g: Gathered) -> threshold_mod.HostRate | None:
        v = g.host.vars
        ifname = v.get("nccl_socket_ifname") or expected.variable(  # as the nccl-interface check reads it
            v, "network_tuning", "network_tuning_nccl_socket_ifname"
        )
        hca = expected.variable(v, "network_tuning", "network_tuning_nccl_ib_hca")
        return threshold_mod.host_rate(g.data, str(ifname or ""), gpus_per_host, str(hca or ""))

    return threshold_mod.from_hardware([(g.host.name, rate(g)) for g in found])


def check(
    inventory: Path, found: list[Gathered], extra_vars: Mapping[str, Any], image: str | None = None
) -> list[Result]:
    """The all-reduce across the found hosts, judged (inside image, when given: `check --image`)."""
    names = [g.host.name for g in found]
    if not names:
        return [Result("bandwidth", "cluster", Status.NOT_APPLICABLE, detail="no reachable host")]
    try:
        threshold = threshold_mod.from_inventory(
            extra_vars.get(THRESHOLD_VAR, found[0].host.vars.get(THRESHOLD_VAR))
        )
    except (TypeError, ValueError):
        return [
            Result(
                "bandwidth",
                "cluster",
                Status.COULD_NOT_RUN,
                detail=f"{THRESHOLD_VAR} is not a number above 0",
            )
        ]
    if len(names) == 1 and threshold is None:
        bar = threshold_mod.one_host(names[0], found[0].data)
        topo = threshold_mod.topology(found[0].data)
        if isinstance(bar, threshold_mod.NoBar) and (topo is None or topo.gpus < 2):
            return [
                Result(
                    "bandwidth",
                    names[0],
                    Status.NOT_APPLICABLE,
                    detail=f"{bar.reason}: nothing to measure on one host; set {THRESHOLD_VAR} to measure it",
                )
            ]
    try:
        report = measure(inventory, names, image, ring_for(len(names)))
    except GpuprovError as exc:
        return [
            Result(
                "bandwidth",
                "cluster",
                Status.COULD_NOT_RUN,
                detail=f"the all-reduce did not run: {exc.message}",
                action="run `gpuprov launch` with a small script on these hosts to see why",
            )
        ]
    return _judged_report(inventory, found, report, threshold, image)


def _judged_report(
    inventory: Path,
    found: list[Gathered],
    report: Mapping[str, Any],
    threshold: threshold_mod.Threshold | None,
    image: str | None = None,
) -> list[Result]:
    """The all-hosts run against the threshold (the hardware's for NCCL when the inventory sets none); when
    it misses, the pairs that find the slow host."""
    names = [g.host.name for g in found]
    values = busbw_gbps(report)
    backend = str(report["backend"])
    bar: threshold_mod.Threshold | threshold_mod.NoBar | None = None
    if threshold is None and backend == "nccl":
        bar = hardware_threshold(found, int(report["world"]) // len(names))
    if isinstance(bar, threshold_mod.Threshold):
        threshold, bar = bar, None
    size = int(report["bytes"])
    shown = f"{size >> 30} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"
    algo = f", NCCL_ALGO={report['algo']}" if report.get("algo") else ""
    what = f"all-reduce {shown}, {backend}{algo}, {report['world']} ranks, median of {len(values)}"
    where = f"all {len(names)} hosts" if len(names) > 1 else names[0]
    if threshold is None:
        return [_unjudged(where, values, what, bar)]
    if len(names) == 1:
        return [judged(where, values, threshold, what, "check the nvlink result and `nvidia-smi nvlink -s`")]
    result = judged(where, values, threshold, what, "see the pair results below for the slow host")
    if result.status is Status.PASS:
        return [result]
    return [result, *pairs(inventory, names, threshold, image)]


def _unjudged(where: str, values: list[float], what: str, bar: threshold_mod.NoBar | None) -> Result:
    """A figure no threshold judges: gloo's (measured by design), or NCCL's where none derives (a warning:
    could not judge, never a pass)."""
    median, spread = _summary(values)
    measured = f"{median:.3f} (spread {spread})"
    if bar is None:
        detail = f"{what}; no threshold: gloo on CPU is measured, not judged"
        return Result(
            "bandwidth", where, Status.PASS, measured, unit="GB/s busbw", source=FORMULA, detail=detail
        )
    return Result(
        "bandwidth",
        where,
        Status.WARN,
        measured,
        unit="GB/s busbw",
        source=FORMULA,
        detail=f"{what}; could not judge: {bar.reason}",
        action=f"set {THRESHOLD_VAR} (GB/s busbw) from a healthy host's figure (docs/check-thresholds.md)",
    )


def ring_rounds(hosts: int) -> list[list[tuple[int, int]]]:
    """Each host with its next in a ring (two pairs per host, three hosts or more), grouped into rounds of
    pairs that share no host: 2 rounds for an even count, 3 for an odd one, whatever the number of hosts."""
    edges = [(i, (i + 1) % hosts) for i in range(hosts)] if hosts > 2 else [(0, 1)]
    rounds: list[list[tuple[int, int]]] = []
    for edge in edges:
        free = next((r for r in rounds if not any(h in pair for pair in r for h in edge)), None)
        if free is None:
            rounds.append([edge])
        else:
            free.append(edge)
    return rounds


def pairs(
    inventory: Path, names: list[str], threshold: threshold_mod.Threshold, image: str | None = None
) -> list[Result]:
    """Each host with the first one; the hosts whose pair misses are the suspects. When every pair misses
    (two at least), the first host is the slow one (or every other host is)."""
    if len(names) == 2:  # the one pair is the all-hosts run again
        return [
            Result(
                "bandwidth",
                "cluster",
                Status.WARN,
                detail="two hosts: a pair test cannot tell which one is slow",
            )
        ]
    rounds = ring_rounds(len(names))
    edges = [edge for in_round in rounds for edge in in_round]
    spec = ";".join(",".join(f"{a}-{b}" for a, b in in_round) for in_round in rounds)
    console.step(f"Isolating the slow host: {len(edges)} host pairs, {len(rounds)} rounds of disjoint pairs")
    try:
        report = measure(inventory, names, image, (*RING, "--rounds", spec))
    except GpuprovError as exc:
        return [Result("bandwidth", "host pairs", Status.COULD_NOT_RUN, detail=exc.message)]
    results = []
    missed: dict[str, list[bool]] = {name: [] for name in names}
    for a, b in edges:
        result = judged(f"{names[a]} <-> {names[b]}", busbw_gbps(report, f"{a}-{b}"), threshold)
        results.append(result)
        for host in (names[a], names[b]):
            missed[host].append(result.status is Status.FAIL)
    slow = [name for name, misses in missed.items() if all(misses)]
    if slow and len(slow) < len(names):
        culprit = ", ".join(slow)
        results.append(
            Result(
                "bandwidth",
                culprit,
                Status.FAIL,
                detail=f"{culprit}: the slow host (its pairs miss, the others' pass)",
                action="check its NIC, link speed, cabling and traffic shaping (tc); drain it until fixed",
            )
        )
    elif slow:
        results.append(
            Result(
                "bandwidth",
                "cluster",
                Status.FAIL,
                detail="every host pair misses: no one host is slower than the rest",
                action="check the fabric (switches, the subnet manager, congestion) and the threshold",
            )
        )
    return results
