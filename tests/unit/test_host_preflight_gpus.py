"""The preflight's GPU generation check (gpuprov.host_preflight): each host's GPUs as its PCI bus shows them,
against the lock, after the lock fits the table; hosts faked, no SSH."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuprov import host_preflight, hosts
from gpuprov.errors import ExitCode
from gpuprov.gpu_generations import PciGpu
from tests.locks import CUDA13

GPUS = {
    "v100": (PciGpu("0000:18:00.0", "1db1"), PciGpu("0000:28:00.0", "1db1")),
    "h100": (PciGpu("0000:18:00.0", "2330"),),
    "newchip": (PciGpu("0000:18:00.0", "fffe"),),
    "nogpu": (),
}


def preflight(monkeypatch: pytest.MonkeyPatch, stack: Any) -> tuple[list[host_preflight.HostReport], Any]:
    def check_host(
        host: hosts.Host, extravars: Mapping[str, Any], also: object = None
    ) -> host_preflight.HostReport:
        return host_preflight.HostReport(
            host.name, "Debian GNU/Linux 12", (), ("debian", "12"), GPUS[host.name]
        )

    monkeypatch.setattr(host_preflight, "check_host", check_host)
    inventory = hosts.Inventory(
        Path("inventory.ini"),
        [hosts.Host(name, f"192.0.2.{i}", 22, "u", None, Path("/k")) for i, name in enumerate(GPUS)],
    )
    return host_preflight.run(inventory, {"gpu_stack": stack})


def test_a_v100_host_fails_a_cuda_13_lock_alone_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    reports, lock_problems = preflight(monkeypatch, CUDA13)
    assert lock_problems == []
    by_host = {r.host: r for r in reports}
    (problem,) = by_host["v100"].problems
    assert problem.check == "gpu"
    assert problem.message.startswith("2x Tesla V100 SXM2 16GB (Volta, 10de:1db1): cuda_version 13.0.2: ")
    assert [r.host for r in reports if r.problems] == ["v100"]
    assert host_preflight.exit_code(reports, lock_problems) == ExitCode.PREFLIGHT_FAILED


def test_an_unknown_gpu_is_a_warning_not_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    reports, _ = preflight(monkeypatch, CUDA13)
    newchip = next(r for r in reports if r.host == "newchip")
    assert newchip.problems == ()
    assert len(newchip.warnings) == 1 and "10de:fffe" in newchip.warnings[0]
    summary = host_preflight.summary(reports, [])
    assert summary["hosts"]["newchip"]["gpus"] == ["10de:fffe"]
    assert summary["hosts"]["newchip"]["warnings"] == list(newchip.warnings)


def test_a_lock_that_does_not_fit_the_table_is_not_compared_with_the_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reports, lock_problems = preflight(monkeypatch, {**CUDA13, "cuda_version": "13.9.9"})
    assert lock_problems
    assert all(r.problems == () for r in reports)
