"""The peermem check judges GPUDirect RDMA as NCCL gets it: DMA-BUF or nvidia_peermem, on the HCAs it uses
(issue 30 item 10). The loaded module is read from recorded /proc/driver/nvidia/version files."""

from __future__ import annotations

from pathlib import Path

from gpuprov.check import gpudirect
from gpuprov.check.results import Status
from tests.unit.check.test_host_checks import gathered, view

PROC = Path(__file__).parents[2] / "recorded" / "proc-driver-nvidia-version"
OPEN_580 = (PROC / "open-x86_64-580.159.04").read_text()
PROPRIETARY = (PROC / "proprietary-x86_64-384.98").read_text()


def judged(
    proc: str, kernel: str, modules: list[str] | None = None, **host_vars: object
) -> tuple[Status, str]:
    data = gathered(
        infiniband=["mlx5_0", "mlx5_1"],
        proc_driver_version=proc,
        kernel=kernel,
        modules=modules or ["nvidia", "mlx5_ib"],
    )
    result = gpudirect.peermem(view(data, gpuprov_gpu_count=8, **host_vars))[0]
    return result.status, result.measured + (f" ({result.detail})" if result.detail else "")


def test_open_module_on_a_recent_kernel_uses_dmabuf_without_peermem() -> None:
    # Ubuntu 24.04's kernel and the recorded H100 host's open 580 module: NVIDIA's recommended path.
    assert judged(OPEN_580, "6.8.0-45-generic") == (Status.PASS, "DMA-BUF for mlx5_0, mlx5_1")


def test_proprietary_module_needs_peermem() -> None:
    status, measured = judged(PROPRIETARY, "6.8.0-45-generic")
    assert status is Status.FAIL and "the proprietary kernel module 384.98" in measured
    assert judged(PROPRIETARY, "6.8.0-45-generic", ["nvidia", "nvidia_peermem"])[0] is Status.PASS


def test_dmabuf_turned_off_in_nccl_conf_needs_peermem() -> None:
    off = {"network_tuning_nccl_extra": {"NCCL_DMABUF_ENABLE": "0"}}
    status, measured = judged(OPEN_580, "5.15.0-127-generic", **off)
    assert status is Status.FAIL and "NCCL_DMABUF_ENABLE=0" in measured


def test_hcas_nccl_does_not_use_need_neither() -> None:
    # A storage-only HCA left out of NCCL_IB_HCA: nothing to judge.
    storage_only = {"network_tuning_nccl_ib_hca": "=mlx5_4"}
    status, why = judged(PROPRIETARY, "5.4.0-216-generic", **storage_only)
    assert status is Status.NOT_APPLICABLE and "picks none" in why
    one = {"network_tuning_nccl_ib_hca": "=mlx5_1:1"}
    assert judged(OPEN_580, "6.8.0-45-generic", **one) == (Status.PASS, "DMA-BUF for mlx5_1")


def test_kernel_releases_are_read_as_numbers() -> None:
    assert gpudirect._release("5.14.0-427.13.1.el9_4.x86_64") == (5, 14)
    assert gpudirect._release("6.8.0-45-generic") >= gpudirect.DMABUF_KERNEL > gpudirect._release("5.4.0-1")
