"""`bench --out DIR`: every problem with where the results go is found before any host is contacted.

bench runs for minutes before it writes bench.json, bench.csv and bench.png: a directory that cannot take
them is bad input (exit 2) at once. The conftest's hosts refuse every connection, so a bench that got past
its options would end with launch's preflight code (6), not 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuprov.errors import ExitCode
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error


def _file(work: Path) -> str:
    (work / "results").write_text("not a directory\n")
    return "results"


def _under_a_file(work: Path) -> str:
    (work / "results").write_text("not a directory\n")
    return "results/today"


def _target_is_a_directory(name: str) -> Callable[[Path], str]:
    def make(work: Path) -> str:
        (work / "results" / name).mkdir(parents=True)
        return "results"

    return make


# Each kind: what makes the bad --out in the work directory (returns the --out value), and a word of the line.
BAD_OUT: dict[str, tuple[Callable[[Path], str], str]] = {
    "a file": (_file, "is a file"),
    "under a file": (_under_a_file, "is a file"),
    "bench.png is a directory": (_target_is_a_directory("bench.png"), "bench.png"),
    "bench.json is a directory": (_target_is_a_directory("bench.json"), "bench.json"),
    "bench.csv is a directory": (_target_is_a_directory("bench.csv"), "bench.csv"),
    "empty": (lambda work: "", "empty"),
    "blank": (lambda work: "  ", "empty"),
    "cannot be made (sysfs)": (lambda work: "/sys/gpuprov-bench-out", "cannot be written"),
    "exists, takes no files (sysfs)": (lambda work: "/sys", "cannot be written"),
}


@pytest.mark.parametrize(("make", "word"), BAD_OUT.values(), ids=BAD_OUT.keys())
def test_bench_out_problems_are_found_before_any_host(
    make: Callable[[Path], str], word: str, work: Path
) -> None:
    out = make(work)
    result = in_process.gpuprov(
        "bench", "-i", "inventory.ini", "--out", out, cwd=work, env={"GPUPROV_STATE_DIR": str(work / "state")}
    )
    line = one_error(result, ExitCode.BAD_INPUT)
    assert line.startswith("error: --out "), line
    assert word in line, line
    assert "Pushing" not in result.stderr and not (work / "state" / "jobs").exists()
