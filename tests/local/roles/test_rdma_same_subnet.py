"""network_tuning's preflight turns files/rdma-netdevs.sh's answer into per-interface sysctl keys: on the RDMA
NICs' interfaces that share an IPv4 subnet ("auto"), on all of them (true), on none (false), with the
network_tuning_rdma_same_subnet_sysctl values, and a dot in an interface's name written as "/"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.local.roles.local_play import ROLES, role_task, run_play

ROLE = ROLES / "network_tuning"
# rdma-netdevs.sh's lines for the recorded host of tests/unit/roles/test_rdma_netdevs.py.
NETDEVS = [
    "ib0 10.20.0.0/16 shared",
    "ib1 10.20.0.0/16 shared",
    "ib2.8001 10.30.1.0/24 alone",
    "ib2.8001 10.30.1.0/24 alone",
]
PER_INTERFACE = {"accept_local": 1, "arp_ignore": 2, "arp_announce": 2, "rp_filter": 2}


def decided(tmp_path: Path, setting: str, lines: list[str]) -> dict[str, Any]:
    out = tmp_path / f"sysctl-{setting}.json"
    write = {"dest": str(out), "content": "{{ __network_tuning_sysctl_all | to_json }}"}
    tasks = [
        role_task("network_tuning", "preflight.yml", "Decide what to set up"),
        {"name": "Write the keys", "ansible.builtin.copy": write},
    ]  # fmt: skip
    extra = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "Debian.yml").read_text()),
        "network_tuning_rdma_same_subnet": setting,
        "__network_tuning_ib_devices": {"stdout_lines": ["mlx5_0", "mlx5_1", "mlx5_2"]},
        "__network_tuning_rdma_netdevs": {"stdout_lines": lines},
    }
    proc = run_play(tmp_path, tasks, extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    keys: dict[str, Any] = json.loads(out.read_text())
    return {k: v for k, v in keys.items() if k.startswith("net.ipv4.conf.")}


def keys_for(*netdevs: str) -> dict[str, int]:
    return {f"net.ipv4.conf.{n}.{k}": v for n in netdevs for k, v in PER_INTERFACE.items()}


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("auto", ("ib0", "ib1")), ("true", ("ib0", "ib1", "ib2/8001")), ("false", ())],
)
def test_the_interfaces_that_get_the_settings(
    tmp_path: Path, setting: str, expected: tuple[str, ...]
) -> None:
    # With false the role does not run the script; its skipped result has no lines.
    lines = [] if setting == "false" else NETDEVS
    assert decided(tmp_path, setting, lines) == keys_for(*expected)


def test_one_nic_per_subnet_sets_nothing(tmp_path: Path) -> None:
    assert decided(tmp_path, "auto", ["ib0 10.20.0.0/16 alone", "ib1 10.21.0.0/16 alone"]) == {}
