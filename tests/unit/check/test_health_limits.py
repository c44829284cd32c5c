"""check's absolute matmul floor, the matmul's thermal soak, and the host program's time budget against
gpuprov's SSH limit (issue 30 items 9 and 11)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpuprov.check import gather, gpu_checks, matmul_floor
from gpuprov.check.results import Status
from gpuprov.onhost import hostprobe, matmul_probe
from tests.unit.check.test_host_checks import gathered, ran, view

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-smi"
H100_Q = (RECORDED / "query-full-1xH100SXM-565.57.01").read_text()  # Product Name: NVIDIA H100 80GB HBM3


def matmul(tflops: dict[str, float], q: str = H100_Q) -> list[tuple[Status, str]]:
    run = {**ran(json.dumps({"n": 16384, "dtype": "float16", "tflops": tflops})), "smi_q_busy": ran(q)}
    v = view(gathered(smi_q=ran(q), matmul=run), gpuprov_gpu_count=len(tflops))
    return [(r.status, r.expected) for r in gpu_checks.matmul(v)]


def test_every_gpu_capped_alike_fails_the_floor_the_median_cannot_see() -> None:
    # 8 H100 SXM all at 400 TFLOPS agree with each other; the published figure says they are slow.
    results = matmul({str(i): 400.0 for i in range(8)})
    assert [status for status, _ in results] == [Status.FAIL] * 8 and "594.1" in results[0][1]
    assert matmul({"0": 659.9})[0][0] is Status.PASS  # the real H100 SXM's recorded figure


def test_a_model_without_a_published_figure_is_judged_only_against_its_host() -> None:
    a40 = (RECORDED / "query-full-1xA40-550.127.05").read_text()
    [(status, expected)] = matmul({"0": 10.0}, a40)
    assert status is Status.PASS and expected.startswith("no published floor for this GPU model")


def test_floors_follow_the_published_table_with_the_stated_margin() -> None:
    assert matmul_floor.MARGIN == 0.75
    assert matmul_floor.BY_PRODUCT_NAME["NVIDIA H100 80GB HBM3"].floor == 594.1
    assert matmul_floor.BY_PRODUCT_NAME["NVIDIA A100-SXM4-80GB"].floor == 200.9
    assert matmul_floor.BY_PRODUCT_NAME["NVIDIA A100 80GB PCIe"].floor == 192.3
    assert matmul_floor.for_gpus(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"]) is None  # mixed host


def test_the_matmul_is_given_its_soak() -> None:
    assert matmul_probe.arguments(["16384", "4", "30"]) == (16384, 4.0, 30.0)
    assert matmul_probe.arguments(["16384", "4"]) == (16384, 4.0, 0.0)
    assert hostprobe.MATMUL_SOAK_S == 30.0
    assert hostprobe.MATMUL_TIMEOUT_S > hostprobe.MATMUL_SOAK_S + hostprobe.MATMUL_SECONDS + 60


def test_ssh_waits_longer_than_every_limit_of_the_host_program() -> None:
    gpu_path = 3 * hostprobe.TOOL_TIMEOUT_S + hostprobe.ENV_PROBE_TIMEOUT_S + hostprobe.MATMUL_TIMEOUT_S
    assert gpu_path < hostprobe.HOST_BUDGET_S
    assert gather.PROBE_TIMEOUT_S > hostprobe.HOST_BUDGET_S


@pytest.fixture
def deadline_passed() -> object:
    saved = dict(hostprobe.SETTINGS)
    hostprobe.SETTINGS["deadline"] = time.monotonic() - 1
    yield
    hostprobe.SETTINGS.update(saved)


@pytest.mark.usefixtures("deadline_passed")
def test_past_its_budget_the_host_program_starts_nothing_and_says_so(tmp_path: Path) -> None:
    run = hostprobe._run(["true"])
    assert run["rc"] is None and "ran out before true" in str(run["skipped"])
    matmul_run = hostprobe._matmul_under_load("python3", "nvidia-smi", "")
    assert "ran out before the matmul" in str(matmul_run["skipped"])


def test_a_tool_gets_only_what_is_left_of_the_budget() -> None:
    saved = dict(hostprobe.SETTINGS)
    hostprobe.SETTINGS["deadline"] = time.monotonic() + 0.5
    try:
        started = time.monotonic()
        run = hostprobe._run(["sleep", "5"])
        assert run["rc"] is None and float(str(run["timeout"])) <= 0.5
        assert time.monotonic() - started < 3
    finally:
        hostprobe.SETTINGS.update(saved)


class _FakeTorch:
    """What _soak uses of torch: a device context, matmul, synchronize; it counts the products per GPU."""

    def __init__(self) -> None:
        self.current = -1
        self.products: dict[int, int] = {}
        self.synced: list[int] = []
        self.cuda = self

    def device(self, index: int) -> _FakeTorch:
        self.current = index
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

    def matmul(self, a: object, b: object) -> None:
        self.products[self.current] = self.products.get(self.current, 0) + 1
        time.sleep(0.001)

    def synchronize(self, index: int) -> None:
        self.synced.append(index)


def test_the_soak_keeps_every_gpu_busy_for_its_time_in_rounds() -> None:
    torch = _FakeTorch()
    started = time.monotonic()
    matmul_probe._soak(torch, [[0, "a", "b", 5], [1, "a", "b", 5]], 0.05)
    assert time.monotonic() - started >= 0.05
    rounds = len(torch.synced) // 2
    assert rounds >= 1 and torch.products == {0: 5 * rounds, 1: 5 * rounds}  # every GPU, whole rounds
    assert torch.synced[:2] == [0, 1]
    matmul_probe._soak(torch, [[0, "a", "b", 5]], 0.0)  # no soak asked: nothing runs
    assert torch.products[0] == 5 * rounds
