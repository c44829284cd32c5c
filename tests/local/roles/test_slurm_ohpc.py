"""The slurm role refuses an EL host that runs OpenHPC's Slurm: OpenHPC names its builds slurm-ohpc,
slurm-slurmd-ohpc, slurm-slurmctld-ohpc, ... (openhpc/ohpc tests/ci/setup_slurm_and_run_tests.sh), and the
role's EPEL or SchedMD packages carry the same files. rpm is a stand-in answering `rpm -qa PATTERN` with the
names it was given, as rpm prints them with --queryformat '%{NAME}\\n'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.local.roles.local_play import ROLES, run_play

pytestmark = pytest.mark.local

CHECK = ROLES / "slurm" / "tasks" / "ohpc-check.yml"


def check(tmp_path: Path, installed: list[str]) -> tuple[int, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    answer = "".join(f"{name}\\n" for name in installed)
    (bin_dir / "rpm").write_text(f"#!/bin/sh\nprintf '{answer}'\n")
    (bin_dir / "rpm").chmod(0o755)
    tasks = [
        {"name": "The check", "ansible.builtin.include_tasks": str(CHECK)},
        {"name": "Passed", "ansible.builtin.debug": {"msg": "no OpenHPC Slurm"}},
    ]
    proc = run_play(
        tmp_path,
        tasks,
        {"__slurm_cluster_hosts": ["localhost"]},
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_a_host_with_openhpcs_slurm_is_refused_naming_its_packages(tmp_path: Path) -> None:
    code, output = check(tmp_path, ["slurm-ohpc", "slurm-slurmd-ohpc"])
    assert code != 0
    assert "localhost has OpenHPC's Slurm installed (slurm-ohpc, slurm-slurmd-ohpc)" in output, output
    assert "--skip-tags slurm" in output and "Nothing was changed." in output, output
    assert "no OpenHPC Slurm" not in output


def test_a_host_without_it_passes(tmp_path: Path) -> None:
    code, output = check(tmp_path, [])
    assert code == 0, output
    assert "no OpenHPC Slurm" in output
