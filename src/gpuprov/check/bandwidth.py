"""All-reduce bus bandwidth across the hosts, run through gpuprov's own launch (onhost/allreduce.py under
torchrun).

Reported as the median bus bandwidth of several repetitions with its spread (min-max). The threshold comes
from the inventory (`gpuprov_check_min_busbw_gbps`), else, for NCCL, from the hardware (busbw_threshold.py):
the hosts' network, or on one host its GPUs' NVLink; gloo on CPU gets none unless the inventory sets one:
the number is reported, marked as such. One host is measured only with a threshold (NVLink or the
inventory's). When the all-hosts figure misses the threshold, host pairs are measured (the first host with
each other one) and the slow host is named.
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


def measure(inventory: Path, names: list[str], image: str | None = None) -> dict[str, Any]:
    """Run the all-reduce on these hosts (inside image, when given); its report (backend, world, bytes,
    seconds per repetition)."""
    # stdout carries only what check is asked for (--json); the result line is read from the log, not shown
    with console.job_lines_on_stderr(), console.protocol_lines_hidden(MARK):
        job_id = launch.run_job(SCRIPT, inventory, names, image=image)
    log = launch.job_log(job_id, names[0])
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if MARK in line:
            report: dict[str, Any] = json.loads(line.split(MARK, 1)[1])
            return report
    raise GpuprovError(f"the all-reduce job {job_id} printed no result (log: {log})")


def busbw_gbps(report: Mapping[str, Any]) -> list[float]:
    """Bus bandwidth of each repetition in GB/s (10^9 bytes per second)."""
    n = int(report["world"])
    factor = 2 * (n - 1) / n if n > 1 else 1.0
    return [float(report["bytes"]) / t / 1e9 * factor for t in report["seconds"] if t > 0]


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


def hardware_threshold(found: list[Gathered], gpus_per_host: int) -> threshold_mod.Threshold | None:
    if len(found) == 1:  # within a host NCCL's traffic goes over NVLink, not the network
        return threshold_mod.from_hardware([(found[0].host.name, threshold_mod.nvlink_rate(found[0].data))])

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
    if len(names) == 1 and threshold is None and threshold_mod.nvlink_rate(found[0].data) is None:
        return [
            Result(
                "bandwidth",
                names[0],
                Status.NOT_APPLICABLE,
                detail="one host without active NVLink on every GPU (nvidia-smi nvlink -s): no hardware "
                f"threshold for its all-reduce; set {THRESHOLD_VAR} to measure it",
            )
        ]
    try:
        report = measure(inventory, names, image)
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
    if threshold is None and backend == "nccl":
        threshold = hardware_threshold(found, int(report["world"]) // len(names))
    size = int(report["bytes"])
    shown = f"{size >> 30} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"
    what = f"all-reduce {shown}, {backend}, {report['world']} ranks, median of {len(values)}"
    where = f"all {len(names)} hosts" if len(names) > 1 else names[0]
    if threshold is None:
        median, spread = _summary(values)
        why = (
            "gloo on CPU is measured, not judged"
            if backend == "gloo"
            else f"the network's rate is unknown on a host: set {THRESHOLD_VAR}"
        )
        return [
            Result(
                "bandwidth",
                where,
                Status.PASS,
                measured=f"{median:.3f} (spread {spread})",
                unit="GB/s busbw",
                source=FORMULA,
                detail=f"{what}; no threshold: {why}",
            )
        ]
    if len(names) == 1:
        return [judged(where, values, threshold, what, "check the nvlink result and `nvidia-smi nvlink -s`")]
    result = judged(where, values, threshold, what, "see the pair results below for the slow host")
    if result.status is Status.PASS:
        return [result]
    return [result, *pairs(inventory, names, threshold, image)]


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
    console.step(f"Isolating the slow host: {len(names) - 1} pair measurement(s)")
    measured: dict[str, float] = {}
    results = []
    for other in names[1:]:
        try:
            values = busbw_gbps(measure(inventory, [names[0], other], image))
        except GpuprovError as exc:
            results.append(
                Result("bandwidth", f"{names[0]} <-> {other}", Status.COULD_NOT_RUN, detail=exc.message)
            )
            continue
        measured[other] = statistics.median(values)
        results.append(judged(f"{names[0]} <-> {other}", values, threshold))
    slow = [name for name, value in measured.items() if value < threshold.gbps]
    # Blaming the first host takes two pairs that miss: one alone cannot tell which of its two is slow.
    if len(measured) >= 2 and len(slow) == len(measured):
        culprit = names[0]
    elif slow and len(slow) < len(measured):
        culprit = ", ".join(slow)
    else:
        culprit = ""
    if culprit:
        results.append(
            Result(
                "bandwidth",
                culprit,
                Status.FAIL,
                detail=f"{culprit}: the slow host (its pairs miss, the others' pass)",
                action="check its NIC, link speed, cabling and traffic shaping (tc); drain it until fixed",
            )
        )
    return results
