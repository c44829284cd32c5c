"""The bus bandwidth arithmetic and the pair test's verdicts (the measurements replaced by given reports)."""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass
class PairJobs:
    speeds: dict[frozenset[str], float] = field(default_factory=dict)  # seconds per repetition, per pair
    calls: list[tuple[str, ...]] = field(default_factory=list)  # each job's arguments


@pytest.fixture
def pair_jobs(monkeypatch: pytest.MonkeyPatch) -> PairJobs:
    """measure() answers the `--rounds` job from the given speeds (slower pair: longer time)."""
    jobs = PairJobs()

    def fake(
        inventory: Path, names: list[str], image: str | None = None, args: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        jobs.calls.append(args)
        spec = args[args.index("--rounds") + 1]
        edges = [pair.split("-") for part in spec.split(";") for pair in part.split(",")]
        times = {f"{a}-{b}": [jobs.speeds[frozenset({names[int(a)], names[int(b)]})]] * 5 for a, b in edges}
        return {**report(len(names), [], size=10**9), "pairs": times, "pair_ranks": dict.fromkeys(times, 2)}

    monkeypatch.setattr(bandwidth, "measure", fake)
    monkeypatch.setattr(bandwidth.console, "step", lambda text: None)
    return jobs


def test_ring_rounds_pair_each_host_with_two_neighbours_in_rounds_of_disjoint_pairs() -> None:
    assert bandwidth.ring_rounds(4) == [[(0, 1), (2, 3)], [(1, 2), (3, 0)]]
    assert bandwidth.ring_rounds(3) == [[(0, 1)], [(1, 2)], [(2, 0)]]
    assert bandwidth.ring_rounds(2) == [[(0, 1)]]
    for hosts in (5, 8, 16, 64):
        rounds = bandwidth.ring_rounds(hosts)
        assert len(rounds) == (2 if hosts % 2 == 0 else 3)  # not hosts - 1 launches one after another
        edges = [edge for in_round in rounds for edge in in_round]
        for in_round in rounds:
            used = [h for edge in in_round for h in edge]
            assert len(used) == len(set(used))  # a round's pairs share no host: they run at once
        assert all(sum(h in edge for edge in edges) == 2 for h in range(hosts))


def test_pairs_name_the_slow_host_in_one_job(pair_jobs: PairJobs) -> None:
    fast, slow = 1.0, 10.0  # 1e9 bytes, 2 ranks: 1 GB/s and 0.1 GB/s busbw against 0.5
    pair_jobs.speeds.update(
        {frozenset("ab"): fast, frozenset("bc"): slow, frozenset("cd"): slow, frozenset("da"): fast}
    )
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c", "d"], threshold=HALF)
    assert [(r.host, r.status) for r in results] == [
        ("a <-> b", Status.PASS),
        ("c <-> d", Status.FAIL),
        ("b <-> c", Status.FAIL),
        ("d <-> a", Status.PASS),
        ("c", Status.FAIL),
    ]
    assert "the slow host" in results[-1].detail
    [args] = pair_jobs.calls  # one job for every pair, NCCL's ring algorithm asked for
    assert args == ("--ring", "--rounds", "0-1,2-3;1-2,3-0")


def test_every_pair_slow_blames_no_single_host(pair_jobs: PairJobs) -> None:
    pair_jobs.speeds.update({frozenset("ab"): 10.0, frozenset("bc"): 10.0, frozenset("ca"): 10.0})
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c"], threshold=HALF)
    assert (results[-1].host, results[-1].status) == ("cluster", Status.FAIL)
    assert "every host pair misses" in results[-1].detail


def test_the_pairs_job_failing_is_one_could_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(inventory: Path, names: list[str], image: str | None = None, args: tuple[str, ...] = ()) -> Any:
        raise GpuprovError("the all-reduce job printed no result")

    monkeypatch.setattr(bandwidth, "measure", fake)
    monkeypatch.setattr(bandwidth.console, "step", lambda text: None)
    results = bandwidth.pairs(Path("inv"), ["a", "b", "c"], threshold=HALF)
    assert [(r.host, r.status) for r in results] == [("host pairs", Status.COULD_NOT_RUN)]


def test_two_hosts_cannot_be_told_apart(pair_jobs: PairJobs) -> None:
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
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None, args=(): nccl)
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
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None, args=(): report(2, [0.1]))
    [result] = bandwidth.check(Path("inv"), _found(ib), {})
    assert (result.status, result.expected) == (Status.PASS, "")
    assert "gloo on CPU is measured, not judged" in result.detail


SMI = Path(__file__).parents[2] / "recorded" / "nvidia-smi"


def _one_host(nvlink_text: str, topo: str = "topo-m-8xNV18-9NIC") -> list[Gathered]:
    host = Host("node1", "192.0.2.1", 22, "u", None, Path("kh"))
    data = {
        "smi_nvlink": {"rc": 0, "stdout": nvlink_text},
        "smi_topo": {"rc": 0, "stdout": (SMI / topo).read_text() if topo else ""},
    }
    return [Gathered(host, data=data, unreachable=False)]


def test_one_host_is_judged_against_its_nvlink(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (SMI / "nvlink-status-V100-inactive").read_text()
    # every GPU pair NV18 (no model known: the links rule), GPU 3's 4 x 25.781 GB/s = 103.124 GB/s x 0.73
    # x 0.8 = 60.224 GB/s; 4 ranks, 1 GiB in 0.02 s: 80.5 GB/s busbw
    nccl = {"backend": "nccl", "world": 4, "bytes": 1 << 30, "seconds": [0.02] * 3, "algo": "Ring"}
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None, args=(): nccl)
    [result] = bandwidth.check(Path("inv"), _one_host(text), {})
    assert (result.host, result.status, result.expected) == ("node1", Status.PASS, ">= 60.224")
    assert result.source.startswith("hardware: node1's GPU 3: 4 x 25.781 GB/s NVLink")
    assert "NCCL_ALGO=Ring" in result.detail
    nccl["seconds"] = [0.04] * 3  # 40 GB/s: misses, and no pair test on one host
    [result] = bandwidth.check(Path("inv"), _one_host(text), {})
    assert result.status is Status.FAIL and "nvlink" in result.action


def test_bridged_pairs_are_measured_and_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    # NVIDIA/nccl-tests#178's A100 PCIe host: NVLink on every GPU, but only within pairs
    text = (SMI / "nvlink-status-8xA100SXM4").read_text()
    nccl = {"backend": "nccl", "world": 8, "bytes": 1 << 30, "seconds": [0.1] * 3}
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None, args=(): nccl)
    [result] = bandwidth.check(Path("inv"), _one_host(text, "topo-m-8xA100PCIe-NV12-pairs"), {})
    assert (result.status, result.expected) == (Status.WARN, "")
    assert "could not judge" in result.detail and "NVIDIA/nccl-tests#178" in result.detail
    assert float(result.measured.split()[0]) > 0 and "gpuprov_check_min_busbw_gbps" in result.action


def test_one_host_without_a_gpu_matrix_is_measured_only_with_an_inventory_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nccl = {"backend": "nccl", "world": 2, "bytes": 1 << 30, "seconds": [0.1] * 3}
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None, args=(): nccl)
    [result] = bandwidth.check(Path("inv"), _one_host("", topo=""), {})  # topo -m printed no matrix
    assert result.status is Status.NOT_APPLICABLE and "nothing to measure" in result.detail
    [result] = bandwidth.check(Path("inv"), _one_host("", topo=""), {"gpuprov_check_min_busbw_gbps": "5"})
    assert (result.status, result.source) == (Status.PASS, "inventory (gpuprov_check_min_busbw_gbps)")


def test_hosts_whose_network_rate_is_unknown_are_not_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    nccl = {"backend": "nccl", "world": 2, "bytes": 1 << 30, "seconds": [0.1] * 3}
    monkeypatch.setattr(bandwidth, "measure", lambda inventory, names, image=None, args=(): nccl)
    [result] = bandwidth.check(Path("inv"), _found(""), {})  # ibstat printed no port, no interface named
    assert result.status is Status.WARN and "could not judge: no network rate known on node1, node2" in (
        result.detail
    )


def test_the_ring_is_forced_on_two_hosts_and_left_to_nccl_beyond() -> None:
    """Bars are ring figures and two hosts' tree/NVLS could beat the network (nccl-tests#160, #196); past two
    hosts a forced ring of 1 GiB falls under the bar from its latency alone (NCCL's cost model)."""
    assert bandwidth.ring_for(1) == bandwidth.ring_for(2) == ("--ring",)
    assert bandwidth.ring_for(3) == bandwidth.ring_for(64) == ()
