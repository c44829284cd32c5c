"""The nvidia_driver role's nouveau blacklist converges: the initramfs is rebuilt on every run until one
rebuild succeeded (then never again for the same blacklist), also when the run that wrote the blacklist
failed. Runs tasks/nouveau.yml on localhost with the blacklist, the stamp and the rebuild tool moved into a
temporary directory; the rebuild tool is a script that counts its calls and fails when told to."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.local.roles.local_play import run_play

# Left out of the fast lane: five runs of the role's nouveau tasks take half a minute or more.
pytestmark = pytest.mark.integration


def run_nouveau(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tool = tmp_path / "update-initramfs"
    extra = {
        "__nvidia_driver_nouveau_blacklist": str(tmp_path / "modprobe.d" / "blacklist-nouveau.conf"),
        "__nvidia_driver_initramfs_stamp": str(tmp_path / "state" / "initramfs-nouveau-blacklist"),
        "__nvidia_driver_initramfs_tools": [{"path": str(tool), "command": [str(tool)]}],
    }
    (tmp_path / "modprobe.d").mkdir(exist_ok=True)
    include = {"ansible.builtin.include_role": {"name": "nvidia_driver", "tasks_from": "nouveau.yml"}}
    return run_play(tmp_path, [include], extra)


def make_tool(tmp_path: Path, exit_code: int) -> None:
    tool = tmp_path / "update-initramfs"
    tool.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'calls'}\nexit {exit_code}\n")
    tool.chmod(0o755)


def calls(tmp_path: Path) -> int:
    path = tmp_path / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def changed(proc: subprocess.CompletedProcess[str]) -> int:
    recap = proc.stdout[proc.stdout.rindex("PLAY RECAP") :]
    return int(recap.split("changed=")[1].split()[0])


def test_a_failed_rebuild_is_retried_until_it_succeeds_then_never_again(tmp_path: Path) -> None:
    make_tool(tmp_path, exit_code=1)
    first = run_nouveau(tmp_path)
    assert first.returncode != 0, first.stdout[-2000:]
    assert (tmp_path / "modprobe.d" / "blacklist-nouveau.conf").exists()
    assert not (tmp_path / "state" / "initramfs-nouveau-blacklist").exists()
    assert calls(tmp_path) == 1

    make_tool(tmp_path, exit_code=0)
    second = run_nouveau(tmp_path)  # blacklist unchanged, rebuild still owed
    assert second.returncode == 0, second.stdout[-2000:]
    assert calls(tmp_path) == 2

    third = run_nouveau(tmp_path)
    assert third.returncode == 0, third.stdout[-2000:]
    assert calls(tmp_path) == 2
    assert changed(third) == 0


def test_a_changed_blacklist_is_rebuilt_again(tmp_path: Path) -> None:
    make_tool(tmp_path, exit_code=0)
    assert run_nouveau(tmp_path).returncode == 0
    assert calls(tmp_path) == 1
    (tmp_path / "modprobe.d" / "blacklist-nouveau.conf").write_text("blacklist nouveau\n")
    repaired = run_nouveau(tmp_path)
    assert repaired.returncode == 0, repaired.stdout[-2000:]
    assert calls(tmp_path) == 2
