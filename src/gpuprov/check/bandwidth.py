"""All-reduce bus bandwidth across the hosts, run through gpuprov's own launch (allreduce.py under torchrun).

Reported as the median bus bandwidth of several repetitions with its spread (min-max). A threshold comes
only from the inventory (`gpuprov_check_min_busbw_gbps`); gloo on CPU gets none unless the inventory sets
one: the number is reported, marked as such. When the all-hosts figure misses the threshold, host pairs
are measured (the first host with each other one) and the slow host is named.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuprov import console
from gpuprov.check.gather import Gathered
from gpuprov.check.results import Result, Status
from gpuprov.errors import GpuprovError
from gpuprov.launch import flow as launch_flow
from gpuprov.launch import jobs
from gpuprov.launch import options as launch_options

SCRIPT = Path(__file__).with_name("allreduce.py")
MARK = "GPUPROV_ALLREDUCE "
THRESHOLD_VAR = "gpuprov_check_min_busbw_gbps"
FORMULA = "busbw = algbw x 2(n-1)/n (nccl-tests doc/PERFORMANCE.md)"


def measure(inventory: Path, names: list[str]) -> dict[str, Any]:
    """Run the all-reduce on these hosts; its report (backend, world, bytes, seconds per repetition)."""
    opts = launch_options.build(script=str(SCRIPT), inventory=str(inventory), hosts=",".join(names))
    with console.job_lines_on_stderr():  # stdout carries only what check is asked for (--json)
        job_id = launch_flow.launch(opts)
    log = jobs.load(job_id).log_path(names[0])
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


def check(inventory: Path, found: list[Gathered], extra_vars: Mapping[str, Any]) -> list[Result]:
    names = [g.host.name for g in found]
    if len(names) < 2:
        return [
            Result("bandwidth", "cluster", Status.NOT_APPLICABLE, detail="fewer than two reachable hosts")
        ]
    threshold_value = extra_vars.get(THRESHOLD_VAR, found[0].host.vars.get(THRESHOLD_VAR))
    try:
        threshold = float(threshold_value) if threshold_value is not None else None
    except (TypeError, ValueError):
        return [
            Result("bandwidth", "cluster", Status.COULD_NOT_RUN, detail=f"{THRESHOLD_VAR} is not a number")
        ]
    try:
        report = measure(inventory, names)
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
    values = busbw_gbps(report)
    median, spread = _summary(values)
    backend = str(report["backend"])
    mib = int(report["bytes"]) >> 20
    what = f"all-reduce {mib} MiB, {backend}, {report['world']} ranks, median of {len(values)}"
    if threshold is None:
        return [
            Result(
                "bandwidth",
                f"all {len(names)} hosts",
                Status.PASS,
                measured=f"{median:.3f} (spread {spread})",
                unit="GB/s busbw",
                source=FORMULA,
                detail=f"{what}; no threshold: "
                + ("gloo on CPU is measured, not judged" if backend == "gloo" else f"set {THRESHOLD_VAR}"),
            )
        ]
    margin = f"{(median - threshold) / threshold * 100:+.0f}%"
    if median >= threshold:
        return [
            Result(
                "bandwidth",
                f"all {len(names)} hosts",
                Status.PASS,
                measured=f"{median:.3f} (spread {spread})",
                expected=f">= {threshold:g}",
                unit="GB/s busbw",
                source=f"inventory ({THRESHOLD_VAR})",
                margin=margin,
                detail=what,
            )
        ]
    results = [
        Result(
            "bandwidth",
            f"all {len(names)} hosts",
            Status.FAIL,
            measured=f"{median:.3f} (spread {spread})",
            expected=f">= {threshold:g}",
            unit="GB/s busbw",
            source=f"inventory ({THRESHOLD_VAR})",
            margin=margin,
            detail=what,
            action="see the pair results below for the slow host",
        )
    ]
    return results + pairs(inventory, names, threshold)


def pairs(inventory: Path, names: list[str], threshold: float) -> list[Result]:
    """Each host with the first one; the hosts whose pair misses are the suspects. When every pair misses,
    the first host is the slow one (or every other host is)."""
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
            median, spread = _summary(busbw_gbps(measure(inventory, [names[0], other])))
        except GpuprovError as exc:
            results.append(
                Result("bandwidth", f"{names[0]} <-> {other}", Status.COULD_NOT_RUN, detail=exc.message)
            )
            continue
        measured[other] = median
        results.append(
            Result(
                "bandwidth",
                f"{names[0]} <-> {other}",
                Status.PASS if median >= threshold else Status.FAIL,
                measured=f"{median:.3f} (spread {spread})",
                expected=f">= {threshold:g}",
                unit="GB/s busbw",
                source=f"inventory ({THRESHOLD_VAR})",
                margin=f"{(median - threshold) / threshold * 100:+.0f}%",
            )
        )
    slow = [name for name, value in measured.items() if value < threshold]
    if measured and len(slow) == len(measured):
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
