"""nvidia_driver's kernel-drift check (tasks/kernel-drift.yml), run by real ansible-playbook on this machine
with the kernel package listings given: a newer kernel pulled in beside the running one (EL9's
kernel-devel-matched) is told apart from a real drift, and each message says what to do."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from gpuprov import resources
from tests.unit.roles.local_play import run_play

TASKS = resources.data_dir("roles") / "nvidia_driver" / "tasks" / "kernel-drift.yml"
VARS = resources.data_dir("roles") / "nvidia_driver" / "vars" / "RedHat-9.yml"
BEFORE = ["kernel-core 5.14.0-427.13.1.el9_4"]


def run_check(
    tmp_path: Path, after: list[str], running: str, allow: bool = False
) -> subprocess.CompletedProcess[str]:
    play_vars = {
        **yaml.safe_load(VARS.read_text()),
        "ansible_facts": {"kernel": "5.14.0-427.13.1.el9_4.x86_64"},
        "nvidia_driver_allow_kernel_change": allow,
        "__nvidia_driver_kernels_before": {"stdout_lines": BEFORE},
        # The query prints the listing after the install; uname -r is replaced too.
        "__nvidia_driver_kernel_query": "printf '%s\\n' " + " ".join(f"'{a}'" for a in after),
    }
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "uname").write_text(f"#!/bin/sh\necho {running}\n")
    (fake_bin / "uname").chmod(0o755)
    env = {
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
    }
    return run_play(
        tmp_path, [{"ansible.builtin.include_tasks": str(TASKS)}], {}, play_vars=play_vars, env=env
    )


RUNNING = "5.14.0-427.13.1.el9_4.x86_64"


def test_no_change_passes(tmp_path: Path) -> None:
    proc = run_check(tmp_path, BEFORE, RUNNING)
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_newer_kernel_pulled_in_says_update_and_reboot_first(tmp_path: Path) -> None:
    proc = run_check(tmp_path, [*BEFORE, "kernel-core 5.14.0-503.11.1.el9_5"], RUNNING)
    assert proc.returncode != 0
    assert "brought a newer kernel" in proc.stdout
    assert "kernel-devel-matched" in proc.stdout
    assert "Update the kernel and reboot first" in proc.stdout and "dnf update 'kernel*'" in proc.stdout


def test_replaced_kernel_is_a_real_drift(tmp_path: Path) -> None:
    proc = run_check(tmp_path, ["kernel-core 5.14.0-503.11.1.el9_5"], RUNNING)
    assert proc.returncode != 0
    assert "changed the kernel" in proc.stdout and "brought a newer kernel" not in proc.stdout


def test_allowed_kernel_change_passes(tmp_path: Path) -> None:
    proc = run_check(tmp_path, [*BEFORE, "kernel-core 5.14.0-503.11.1.el9_5"], RUNNING, allow=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
