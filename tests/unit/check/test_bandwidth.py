"""The bus bandwidth arithmetic and the pair test's verdicts (the measurements replaced by given reports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov.check import bandwidth
from gpuprov.check.busbw_threshold import Threshold
from gpuprov.check.gather import Gathered
from gpuprov.check.results import Status
from gpuprov.errors import GpuprovError
from gpuprov.hosts import Host

MIB16 = 16 << 20
HALF = Threshold(0.5, "test")


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

    def fake(inventory: Path, names: list[str], image: str | None = None) -> dict[str, Any]:
        return report(len(names), [speeds[frozenset(names)]] * 5, size=10**9)

    monkeypatch.setattr(bandwidth, "measure", fake)
    monkeypatch.setattr(bandwidth.console, "step", lambda text: None)
    return speeds


def test_pairs_name_the_slow_host(pair_speeds: dict[frozenset[str], float]) -> None:
    pair_speeds.update({frozenset({"a", "b"}): 1.0, frozenset({"a", "c"}): 10.0, frozenset({"a", "d"}): 1.0})
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c", "d"], threshold=HALF)
    assert [(r.host, r.status) for r in results] == [
        ("a <-> b", Status.PASS),
        ("a <-> c", Status.FAIL),
        ("a <-> d", Status.PASS),
        ("c", Status.FAIL),
    ]
    assert "the slow host" in results[-1].detail


def test_every_pair_slow_names_the_first_host(pair_speeds: dict[frozenset[str], float]) -> None:
    pair_speeds.update({frozenset({"a", "b"}): 10.0, frozenset({"a", "c"}): 10.0})
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c"], threshold=HALF)
    assert (results[-1].host, results[-1].status) == ("a", Status.FAIL)


def test_one_slow_pair_alone_names_no_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """a <-> b could not run, a <-> c missed: a or c is slow, the pairs cannot say which."""

    def fake(inventory: Path, names: list[str], image: str | None = None) -> dict[str, Any]:
        if "b" in names:
            raise GpuprovError("the all-reduce job printed no result")
        return report(2, [10.0] * 5, size=10**9)

    monkeypatch.setattr(bandwidth, "measure", fake)
    monkeypatch.setattr(bandwidth.console, "step", lambda text: None)
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c"], threshold=HALF)
    assert [(r.host, r.status) for r in results] == [
        ("a <-> b", Status.COULD_NOT_RUN),
        ("a <-> c", Status.FAIL),
    ]


def test_two_hosts_cannot_be_told_apart(pair_speeds: dict[frozenset[str], float]) -> None:
    results = bandwidth.pairs(Path("inv"), ["a", "b"], threshold=HALF)  # nothing measured (no speeds given)
    assert len(results) == 1 and results[0].status is Status.WARN and "cannot tell" in results[0].detail


def test_judged_pass_and_fail_differ_in_status_and_action_only() -> None:
    passed = bandwidth.judged("all 3 hosts", [1.0, 1.2, 0.9], HALF, "what", "look at the pairs")
    failed = bandwidth.judged("all 3 hosts", [0.4, 0.3, 0.45], HALF, "what", "look at the pairs")
    assert (passed.status, passed.action, passed.margin) == (Status.PASS, "", "+100%")
    assert (failed.status, failed.action, failed.margin) == (Status.FAIL, "look at the pairs", "-20%")
    assert (failed.expected, failed.source, failed.unit) == (">= 0.5", "test", "GB/s busbw")


def _found(ibstat_text: str) -> list[Gathered]:
    return [
        Gathered(
            Host(name, "192.0.2.1", 22, "u", None, Path("kh")),
            data={"ibstat": {"rc": 0, "stdout": ibstat_text}},
            unreachable=False,
        )
        for name in ("node1", "node2")
    ]


def test_nccl_without_an_inventory_threshold_is_judged_against_the_hardware(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ib = "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 100\n"
    # 2 hosts x 1 GPU: 1 GiB in 0.1 s is 10.7 GB/s algbw = busbw (n = 2); 100 Gb/s x 0.96 x 0.8 = 9.6
    nccl = {"backend": "nccl", "world": 2, "bytes": 1 << 30, "seconds": [0.1, 0.1, 0.1]}
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None: nccl)
    [result] = bandwidth.check(Path("inv"), _found(ib), {})
    assert (result.status, result.expected) == (Status.PASS, ">= 9.6")
    assert result.source.startswith("hardware: node1's 1 x 100 Gb/s InfiniBand (ibstat)")
    assert result.detail.startswith("all-reduce 1 GiB, nccl, 2 ranks")
    # the inventory's figure wins over the hardware's
    result, two_hosts = bandwidth.check(Path("inv"), _found(ib), {"gpuprov_check_min_busbw_gbps": "11"})
    assert (result.status, result.source) == (Status.FAIL, "inventory (gpuprov_check_min_busbw_gbps)")
    assert two_hosts.status is Status.WARN  # two hosts: no pair test can tell which is slow


def test_gloo_gets_no_hardware_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    ib = "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 100\n"
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None: report(2, [0.1]))
    [result] = bandwidth.check(Path("inv"), _found(ib), {})
    assert (result.status, result.expected) == (Status.PASS, "")
    assert "gloo on CPU is measured, not judged" in result.detail


def _one_host(nvlink_text: str) -> list[Gathered]:
    host = Host("node1", "192.0.2.1", 22, "u", None, Path("kh"))
    return [Gathered(host, data={"smi_nvlink": {"rc": 0, "stdout": nvlink_text}}, unreachable=False)]


def test_one_host_is_judged_against_its_nvlink(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (Path(__file__).parents[2] / "recorded" / "nvidia-smi" / "nvlink-status-V100-inactive").read_text()
    # 4 x 25.781 GB/s = 103.124 GB/s x 0.73 x 0.8 = 60.224 GB/s; 4 ranks, 1 GiB in 0.02 s: 80.5 GB/s busbw
    nccl = {"backend": "nccl", "world": 4, "bytes": 1 << 30, "seconds": [0.02] * 3}
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None: nccl)
    [result] = bandwidth.check(Path("inv"), _one_host(text), {})
    assert (result.host, result.status, result.expected) == ("node1", Status.PASS, ">= 60.224")
    assert result.source.startswith("hardware: node1's GPU 3: 4 x 25.781 GB/s NVLink")
    nccl["seconds"] = [0.04] * 3  # 40 GB/s: misses, and no pair test on one host
    [result] = bandwidth.check(Path("inv"), _one_host(text), {})
    assert result.status is Status.FAIL and "nvlink" in result.action


def test_one_host_without_nvlink_is_measured_only_with_an_inventory_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nccl = {"backend": "nccl", "world": 2, "bytes": 1 << 30, "seconds": [0.1] * 3}
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None: nccl)
    [result] = bandwidth.check(Path("inv"), _one_host(""), {})  # PCIe only: no NVLink GPU listed
    assert result.status is Status.NOT_APPLICABLE and "no hardware threshold" in result.detail
    [result] = bandwidth.check(Path("inv"), _one_host(""), {"gpuprov_check_min_busbw_gbps": "5"})
    assert (result.status, result.source) == (Status.PASS, "inventory (gpuprov_check_min_busbw_gbps)")
