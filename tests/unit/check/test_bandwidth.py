"""The bus bandwidth arithmetic and the pair test's verdicts (the measurements replaced by given reports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov.check import bandwidth
from gpuprov.check.results import Status

MIB16 = 16 << 20


def report(world: int, seconds: list[float], size: int = MIB16) -> dict[str, Any]:
    return {"backend": "gloo", "world": world, "bytes": size, "seconds": seconds}


def test_busbw_is_algbw_times_2_n_minus_1_over_n() -> None:
    # 1e9 bytes in 1 s is 1 GB/s algbw; 4 ranks: busbw = 1 x 2 x 3 / 4 = 1.5 GB/s (nccl-tests' definition).
    assert bandwidth.busbw_gbps(report(4, [1.0, 2.0], size=10**9)) == pytest.approx([1.5, 0.75])
    assert bandwidth.busbw_gbps(report(2, [0.5], size=10**9)) == pytest.approx([2.0])


@pytest.fixture
def pair_speeds(monkeypatch: pytest.MonkeyPatch) -> dict[frozenset[str], float]:
    """Each pair's time per repetition; measure() answers from it (slower pair: longer time)."""
    speeds: dict[frozenset[str], float] = {}

    def fake(inventory: Path, names: list[str]) -> dict[str, Any]:
        return report(len(names), [speeds[frozenset(names)]] * 5, size=10**9)

    monkeypatch.setattr(bandwidth, "measure", fake)
    monkeypatch.setattr(bandwidth.console, "step", lambda text: None)
    return speeds


def test_pairs_name_the_slow_host(pair_speeds: dict[frozenset[str], float]) -> None:
    pair_speeds.update({frozenset({"a", "b"}): 1.0, frozenset({"a", "c"}): 10.0, frozenset({"a", "d"}): 1.0})
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c", "d"], threshold=0.5)
    assert [(r.host, r.status) for r in results] == [
        ("a <-> b", Status.PASS),
        ("a <-> c", Status.FAIL),
        ("a <-> d", Status.PASS),
        ("c", Status.FAIL),
    ]
    assert "the slow host" in results[-1].detail


def test_every_pair_slow_names_the_first_host(pair_speeds: dict[frozenset[str], float]) -> None:
    pair_speeds.update({frozenset({"a", "b"}): 10.0, frozenset({"a", "c"}): 10.0})
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c"], threshold=0.5)
    assert (results[-1].host, results[-1].status) == ("a", Status.FAIL)


def test_two_hosts_cannot_be_told_apart(pair_speeds: dict[frozenset[str], float]) -> None:
    results = bandwidth.pairs(Path("inv"), ["a", "b"], threshold=0.5)  # nothing measured (no speeds given)
    assert len(results) == 1 and results[0].status is Status.WARN and "cannot tell" in results[0].detail
