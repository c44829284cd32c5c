"""The nvlink5 and imex checks, and hostprobe's reading of the InfiniBand devices' VPD on a stand-in sysfs
tree (tests/standin_nvlink5.py: an HGX B200's NVSwitch managers beside a plain NIC)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov.check import gpu_checks, nvlink_fabric
from gpuprov.check.results import Status
from gpuprov.onhost import hostprobe
from tests.standin_nvlink5 import write_infiniband
from tests.unit.check.test_host_checks import gathered, ran, view

B200 = {"managers": ["mlx5_1", "mlx5_2"], "unreadable": []}


def test_hostprobe_finds_the_switch_managers_by_their_vpd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    klass = write_infiniband(tmp_path, {"mlx5_0": False, "mlx5_1": True, "mlx5_2": True})
    monkeypatch.setattr(hostprobe, "INFINIBAND_CLASS", str(klass))
    assert hostprobe._nvlink5_switch_managers() == B200


def test_hostprobe_without_infiniband(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostprobe, "INFINIBAND_CLASS", str(tmp_path / "absent"))
    assert hostprobe._nvlink5_switch_managers() == {"managers": [], "unreadable": []}


def test_root_only_vpd_is_read_through_sudo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vpd is mode 0600 (the kernel's BIN_ATTR(vpd, 0600, ...)): a user's open fails; sudo -n grep reads."""
    klass = write_infiniband(tmp_path, {"mlx5_0": False, "mlx5_1": True})
    monkeypatch.setattr(hostprobe, "INFINIBAND_CLASS", str(klass))
    real_open = open

    def denied(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith("/vpd"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    calls: list[list[str]] = []

    def sudo(argv: list[str], **_: Any) -> dict[str, Any]:
        calls.append(argv)
        return ran(f"{klass}/mlx5_1/device/vpd\n")

    monkeypatch.setattr("builtins.open", denied)
    monkeypatch.setattr(hostprobe, "_run", sudo)
    assert hostprobe._nvlink5_switch_managers() == {"managers": ["mlx5_1"], "unreadable": []}
    assert calls[0][:5] == ["sudo", "-n", "grep", "-l", "SW_MNG"]
    monkeypatch.setattr(
        hostprobe,
        "_run",
        lambda argv, **_: {"rc": 1, "stdout": "", "stderr": "sudo: a password is required\n"},
    )
    assert hostprobe._nvlink5_switch_managers() == {"managers": [], "unreadable": ["mlx5_0", "mlx5_1"]}


def test_nvlink5_needs_fabric_manager_and_ib_umad() -> None:
    ready = gathered(nvlink5=B200, fabricmanager=ran("active\n"), modules=["ib_umad", "mlx5_ib"])
    assert nvlink_fabric.nvlink5(view(ready, gpuprov_gpu_count=8))[0].status is Status.PASS
    no_umad = gathered(nvlink5=B200, fabricmanager=ran("active\n"), modules=["mlx5_ib"])
    result = nvlink_fabric.nvlink5(view(no_umad, gpuprov_gpu_count=8))[0]
    assert (
        result.status is Status.FAIL and result.measured == "nvidia-fabricmanager active, ib_umad not loaded"
    )
    down = gathered(nvlink5=B200, fabricmanager=ran("failed\n", rc=3), modules=["ib_umad"])
    assert nvlink_fabric.nvlink5(view(down, gpuprov_gpu_count=8))[0].status is Status.FAIL


def test_nvlink5_not_applicable_and_could_not_run() -> None:
    plain = gathered(nvlink5={"managers": [], "unreadable": []})
    assert nvlink_fabric.nvlink5(view(plain, gpuprov_gpu_count=8))[0].status is Status.NOT_APPLICABLE
    hidden = gathered(nvlink5={"managers": [], "unreadable": ["mlx5_0"]})
    assert nvlink_fabric.nvlink5(view(hidden, gpuprov_gpu_count=8))[0].status is Status.COULD_NOT_RUN


def test_fabricmanager_check_points_at_nvlink5_on_a_b200() -> None:
    b200 = gathered(pci_nvswitches=0, nvlink5=B200)
    result = gpu_checks.fabricmanager(view(b200, gpuprov_gpu_count=8))[0]
    assert result.status is Status.NOT_APPLICABLE and "nvlink5 check" in result.detail


def test_imex_where_installed() -> None:
    packages = {"manager": "apt", "installed": {"nvidia-imex": "580.126.09-1"}, "held": ["nvidia-imex"]}
    up = gathered(packages=packages, imex=ran("active\n"))
    assert nvlink_fabric.imex(view(up))[0].status is Status.PASS
    down = gathered(packages=packages, imex=ran("activating\n", rc=3))
    result = nvlink_fabric.imex(view(down))[0]
    assert result.status is Status.FAIL and result.measured == "nvidia-imex activating"
    branch = {**packages, "installed": {"nvidia-imex-570": "570.172.08-1"}}
    assert nvlink_fabric.imex(view(gathered(packages=branch, imex=ran("active\n"))))[0].status is Status.PASS
    assert nvlink_fabric.imex(view(gathered()))[0].status is Status.NOT_APPLICABLE
