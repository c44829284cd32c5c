"""The result of one check on one host (or host pair, or the cluster), and the exit code a run ends with."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from gpuprov.errors import ExitCode


class Status(enum.StrEnum):
    FAIL = "fail"
    COULD_NOT_RUN = "could-not-run"  # the check should run and cannot (a tool missing, a timeout)
    WARN = "warn"
    PASS = "pass"
    NOT_APPLICABLE = "not-applicable"  # the check does not apply to the host (no GPU, no InfiniBand)


# Failures first, then what could not run, then warnings: the order of the table.
_ORDER = {Status.FAIL: 0, Status.COULD_NOT_RUN: 1, Status.WARN: 2, Status.PASS: 3, Status.NOT_APPLICABLE: 4}


@dataclass(frozen=True)
class Result:
    check: str  # the check's name, as --only/--skip take it
    host: str  # a host, "a <-> b" for a pair, or "cluster"
    status: Status
    measured: str = ""
    expected: str = ""  # the expected value or the threshold
    unit: str = ""
    source: str = ""  # where the expected value or threshold comes from
    margin: str = ""  # how far measured is from the threshold, where that is a number
    detail: str = ""  # why, in a few words
    action: str = ""  # what to do (for fail, warn and could-not-run)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


def verdict(
    check: str, host: str, ok: bool, *, action: str, otherwise: Status = Status.FAIL, **fields: str
) -> Result:
    """PASS when ok, else `otherwise` (FAIL, or WARN where it is only worth a look) with the action: a check
    that passed asks nothing of the user."""
    return Result(check, host, Status.PASS if ok else otherwise, action="" if ok else action, **fields)


def ordered(results: Iterable[Result]) -> list[Result]:
    """Failures first, then could-not-run, warnings, passes and what does not apply; stable otherwise."""
    return sorted(results, key=lambda r: _ORDER[r.status])


def exit_code(results: Iterable[Result]) -> ExitCode:
    """1 when a check failed; else 8 when a check could not run; else 0 (warnings allowed)."""
    statuses = {r.status for r in results}
    if Status.FAIL in statuses:
        return ExitCode.FAILURE
    if Status.COULD_NOT_RUN in statuses:
        return ExitCode.CHECK_COULD_NOT_RUN
    return ExitCode.OK


def counts(results: Iterable[Result]) -> dict[str, int]:
    found = {status.value: 0 for status in Status}
    for result in results:
        found[result.status.value] += 1
    return found
