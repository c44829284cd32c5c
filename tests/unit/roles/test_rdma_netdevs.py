"""network_tuning's files/rdma-netdevs.sh: which RDMA NICs' interfaces share an IPv4 subnet.

The sysfs tree is laid out as the kernel's Documentation/ABI/stable/sysfs-class-infiniband describes it
(<device>/device/net/<netdev>, <device>/ports/<port>/gid_attrs/ndevs/<index>); `ip` is replaced by a script
that prints a real `ip -o -4 addr show scope global` (tests/recorded/ip-addr/SOURCES.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpuprov import resources

SCRIPT = resources.data_dir("roles") / "network_tuning" / "files" / "rdma-netdevs.sh"
RECORDED = Path(__file__).parents[2] / "recorded" / "ip-addr" / "four-interfaces-two-in-one-subnet.txt"


def run(tmp_path: Path, pci_netdevs: dict[str, list[str]], gid_netdevs: dict[str, list[str]]) -> list[str]:
    sysfs = tmp_path / "infiniband"
    sysfs.mkdir()
    for device, names in pci_netdevs.items():
        for name in names:
            (sysfs / device / "device" / "net" / name).mkdir(parents=True)
    for device, names in gid_netdevs.items():
        ndevs = sysfs / device / "ports" / "1" / "gid_attrs" / "ndevs"
        ndevs.mkdir(parents=True, exist_ok=True)
        for index, name in enumerate(names):
            (ndevs / str(index)).write_text(f"{name}\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ip").write_text(f"#!/bin/sh\ncat {RECORDED}\n")
    (bin_dir / "ip").chmod(0o755)
    proc = subprocess.run(
        ["sh", str(SCRIPT), str(sysfs)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    return proc.stdout.splitlines()


def test_two_ipoib_interfaces_in_one_subnet_are_shared_and_the_others_alone(tmp_path: Path) -> None:
    found = run(tmp_path, {"mlx5_0": ["ib0"], "mlx5_1": ["ib1"], "mlx5_2": ["ib2", "ib2.8001"]}, {})
    assert sorted(found) == [
        "ib0 10.20.0.0/16 shared",
        "ib1 10.20.0.0/16 shared",
        # Two addresses of one interface in one network: still one interface there.
        "ib2.8001 10.30.1.0/24 alone",
        "ib2.8001 10.30.1.0/24 alone",
    ]


def test_the_management_interface_is_not_an_rdma_one(tmp_path: Path) -> None:
    assert run(tmp_path, {"mlx5_0": ["ib0"]}, {}) == ["ib0 10.20.0.0/16 alone"]


def test_roce_interfaces_named_by_their_gids_count_too(tmp_path: Path) -> None:
    """A RoCE NIC over a VLAN or bond: its interface is named by the GID table, not under device/net."""
    found = run(tmp_path, {"mlx5_0": ["ib0"]}, {"mlx5_bond_0": ["ib1", "ib1", ""]})
    assert sorted(found) == ["ib0 10.20.0.0/16 shared", "ib1 10.20.0.0/16 shared"]


def test_no_rdma_device_prints_nothing(tmp_path: Path) -> None:
    assert run(tmp_path, {}, {}) == []
