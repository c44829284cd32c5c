"""The batching of playbooks/reboot.yml, run by real ansible-playbook in --check mode.

Containers cannot reboot, so the reboot play is checked here with five hosts that are all this machine
(community.general.chroot into /, which is not the `local` connection the reboot module refuses); in check
mode ansible.builtin.reboot reports a reboot without doing one. Each host has its own reboot mark file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import resources

BIN = Path(sys.executable).parent

# Left out of the fast lane: root, a chroot connection, and three playbook runs of five hosts each.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the chroot connection needs root"),
]


def run_reboot_play(tmp_path: Path, marked: list[str], batch: str, extra: str = "") -> list[dict]:
    hosts = [f"host{i}" for i in range(1, 6)]
    lines = ["[gpu_nodes]"]
    for host in hosts:
        marker = tmp_path / f"{host}.reboot-required"
        if host in marked:
            marker.write_text("driver 550.127.08 is installed but no driver is loaded\n")
        lines.append(f"{host} nvidia_driver_reboot_marker={marker}")
    lines += [
        "[gpu_nodes:vars]",
        "ansible_connection=community.general.chroot",
        "ansible_host=/",
        "ansible_become=false",
        "ansible_python_interpreter=" + sys.executable,
        f"nvidia_driver_reboot_batch_size={batch}",
        # include_role runs nvidia_driver's dependency nvidia_repository too: as if it had set it up.
        "nvidia_repository_pending=false",
        extra,
    ]
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("\n".join(lines) + "\n")
    env = {
        **os.environ,
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles")),
        "ANSIBLE_NOCOLOR": "1",
    }
    proc = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(inventory),
            "--check",
            str(resources.data_dir("playbooks") / "reboot.yml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout)["plays"]


def reboot_batches(plays: list[dict]) -> list[list[str]]:
    batches = []
    for play in plays:
        for task in play["tasks"]:
            if task["task"]["name"].endswith("Reboot to load the NVIDIA driver"):
                batches.append(sorted(h for h, r in task["hosts"].items() if r.get("rebooted")))
    return batches


def test_only_marked_hosts_reboot_in_batches_of_the_configured_size(tmp_path: Path):
    plays = run_reboot_play(tmp_path, ["host1", "host3", "host4"], batch="2")
    batches = reboot_batches(plays)
    # Batches of two, then the rest; which marked host lands in which batch follows the order in which
    # hosts joined the pending group, which Ansible does not fix.
    assert [len(batch) for batch in batches] == [2, 1]
    assert sorted(host for batch in batches for host in batch) == ["host1", "host3", "host4"]
    # Check mode rebooted nothing and left every mark in place.
    assert sorted(p.name for p in tmp_path.glob("*.reboot-required")) == [
        "host1.reboot-required",
        "host3.reboot-required",
        "host4.reboot-required",
    ]


def test_a_percentage_batch_and_one_batch_for_all(tmp_path: Path):
    plays = run_reboot_play(tmp_path, ["host2", "host5"], batch="100%")
    assert reboot_batches(plays) == [["host2", "host5"]]


def test_reboot_off_reboots_nothing(tmp_path: Path):
    plays = run_reboot_play(tmp_path, ["host1", "host2"], batch="1", extra="nvidia_driver_reboot=false")
    assert reboot_batches(plays) == []
