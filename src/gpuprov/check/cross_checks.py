"""Checks across hosts from what each host reported: the versions agree, and the odd host out is named."""

from __future__ import annotations

from collections import defaultdict

from gpuprov.check.results import Result, Status

# The per-host results whose measured value must be the same on every host.
VERSION_CHECKS = ("driver-package", "driver-module", "cuda", "cudnn", "nccl", "python", "torch")


def versions_agree(results: list[Result], host_count: int) -> list[Result]:
    """One result per version: pass when every host that reported it has the same, else a fail naming the
    hosts outside the largest group, with what they have and what the others have."""
    if host_count < 2:
        return [
            Result("versions-agree", "cluster", Status.NOT_APPLICABLE, detail="one host: nothing to compare")
        ]
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    off_lock: set[tuple[str, str]] = set()  # (check, value) that some host's lock check failed
    for result in results:
        if result.check in VERSION_CHECKS and result.measured and result.status in (Status.PASS, Status.FAIL):
            found[result.check][result.measured].append(result.host)
            if result.status is Status.FAIL:
                off_lock.add((result.check, result.measured))
    out = []
    for check in VERSION_CHECKS:
        groups = found.get(check)
        if not groups:
            continue
        # The largest group is the common one; on a tie, the group whose value is the lock's.
        ranked = sorted(
            groups.items(), key=lambda item: (-len(item[1]), (check, item[0]) in off_lock, item[0])
        )
        if len(ranked) == 1:
            value, hosts = ranked[0]
            out.append(
                Result(
                    "versions-agree",
                    "cluster",
                    Status.PASS,
                    measured=f"{check} {value}",
                    detail=f"the same on {len(hosts)} host(s)",
                )
            )
            continue
        common, others = ranked[0][0], ranked[1:]
        for value, hosts in others:
            out.append(
                Result(
                    "versions-agree",
                    ", ".join(hosts),
                    Status.FAIL,
                    measured=f"{check} {value}",
                    expected=f"{check} {common}",
                    source="the other hosts",
                    detail=f"{', '.join(hosts)} has {check} {value}; "
                    f"the other {len(ranked[0][1])} host(s) have {common}",
                    action="run gpuprov bootstrap on the odd host (--limit it)",
                )
            )
    return out
