"""Which exit code a failed launch preflight ends with: the worst problem decides, as in bootstrap."""

from __future__ import annotations

import pytest

from gpuprov.errors import ExitCode
from gpuprov.launch import preflight
from gpuprov.launch.preflight import INPUT, NOT_READY, UNREACHABLE, Problem


@pytest.mark.parametrize(
    ("kinds", "code"),
    [
        ([UNREACHABLE], ExitCode.HOSTS_UNREACHABLE),
        ([NOT_READY, UNREACHABLE, INPUT], ExitCode.HOSTS_UNREACHABLE),
        ([NOT_READY], ExitCode.PREFLIGHT_FAILED),
        ([INPUT, NOT_READY], ExitCode.PREFLIGHT_FAILED),
        ([INPUT], ExitCode.BAD_INPUT),
    ],
)
def test_the_worst_problem_decides_the_exit_code(kinds: list[str], code: ExitCode) -> None:
    problems = [Problem(kind, f"problem {i}") for i, kind in enumerate(kinds)]
    failed = preflight.PreflightFailed(problems)
    assert failed.exit_code == code
    assert failed.problems == [p.text for p in problems]


def test_one_problem_is_the_message_itself() -> None:
    failed = preflight.PreflightFailed([Problem(NOT_READY, "node2: no Python env at /x")])
    assert failed.message == "preflight: node2: no Python env at /x; nothing was started"
    assert failed.exit_code == 7
