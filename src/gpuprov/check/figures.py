"""The figures a user runs `gpuprov check` for, in one compact table at the end: the all-reduce bus bandwidth
with its threshold (or why there is none), the matmul TFLOPS of each host, and the versions found.

They are read from the results themselves (nothing is measured twice): the bandwidth and matmul results'
measured values, and the versions the version checks found on each host.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable

from gpuprov.check.results import Result, Status

COLUMNS = ["figure", "where", "value", "threshold / note"]
# The version checks whose measured value is the version found, in the order shown.
VERSIONS = {
    "driver-package": "driver",
    "cuda": "CUDA",
    "cudnn": "cuDNN",
    "nccl": "NCCL",
    "torch": "torch",
    "python": "Python",
}
_NUMBER = re.compile(r"GPU (\d+): ([0-9.eE+-]+)")


def rows(results: Iterable[Result]) -> list[list[str]]:
    """[figure, where, value, threshold or note] rows: bandwidth, then matmul per host, then versions."""
    results = list(results)
    return [*_bandwidth(results), *_matmul(results), *_versions(results)]


def as_dicts(results: Iterable[Result]) -> list[dict[str, str]]:
    """The rows for JSON: {figure, where, value, note}."""
    return [dict(zip(("figure", "where", "value", "note"), row, strict=True)) for row in rows(results)]


def _bandwidth(results: list[Result]) -> list[list[str]]:
    found = [r for r in results if r.check == "bandwidth"]
    measured = [r for r in found if r.measured]
    if measured:
        return [["bus bandwidth", r.host, f"{r.measured} {r.unit}".strip(), _threshold(r)] for r in measured]
    # Not measured: say why (one host without NVLink, a job that did not run, no host reached).
    return [["bus bandwidth", r.host, "-", f"not measured: {r.detail}"] for r in found if r.detail]


def _threshold(result: Result) -> str:
    if result.expected:
        source = f" ({result.source})" if result.source else ""
        return f"{result.expected}{source}; {result.status.value}"
    for mark, shown in (("could not judge: ", "could not judge"), ("no threshold: ", "none")):
        if mark in result.detail:
            return f"{shown}: {result.detail.split(mark, 1)[1]}"
    return "none"


def _matmul(results: list[Result]) -> list[list[str]]:
    """One row per host: each GPU's TFLOPS and their median; a host whose matmul failed says so."""
    per_host: dict[str, dict[int, float]] = {}
    failed: dict[str, str] = {}
    for result in results:
        if result.check != "matmul" or result.status is Status.NOT_APPLICABLE:
            continue
        match = _NUMBER.match(result.measured)
        if match:
            per_host.setdefault(result.host, {})[int(match.group(1))] = float(match.group(2))
        elif result.detail:
            failed[result.host] = result.detail
    table = []
    for host, gpus in per_host.items():
        values = [gpus[index] for index in sorted(gpus)]
        each = ", ".join(f"{value:g}" for value in values)
        slow = [r for r in results if r.check == "matmul" and r.host == host and r.status is Status.WARN]
        floor = [r for r in results if r.check == "matmul" and r.host == host and r.status is Status.FAIL]
        note = f"{len(slow)} GPU(s) below 0.75 x the median" if slow else "GPUs agree"
        note = f"{len(floor)} GPU(s) below the model's floor; {note}" if floor else note
        table.append(["matmul TFLOPS", host, f"median {statistics.median(values):g} (GPUs: {each})", note])
    table += [["matmul TFLOPS", host, "-", f"did not run: {why}"] for host, why in failed.items()]
    return table


def _versions(results: list[Result]) -> list[list[str]]:
    """One row per component: the version found, on every host, or each host's where they differ."""
    table = []
    for check, label in VERSIONS.items():
        found = {r.host: r.measured for r in results if r.check == check and r.measured}
        if not found:
            continue
        values = set(found.values())
        if len(values) == 1:
            where = "all hosts" if len(found) > 1 else next(iter(found))
            table.append([label, where, values.pop(), ""])
        else:
            table += [[label, host, value, "hosts differ"] for host, value in found.items()]
    return table
