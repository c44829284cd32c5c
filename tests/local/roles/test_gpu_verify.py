"""The nvidia_driver role's GPU check against a real nvidia-smi: runs only on a machine with NVIDIA GPUs.

The sandbox's nvidia-smi is a stand-in; this checks that the role reads the real tool's output: it passes
with the driver the machine runs, and fails, naming both versions, with another one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import resources

BIN = Path(sys.executable).parent


def real_driver_version() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    proc = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    )
    lines = proc.stdout.split()
    return lines[0] if proc.returncode == 0 and lines else None


DRIVER = real_driver_version()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(DRIVER is None, reason="no NVIDIA GPU on this machine")]


def run_gpu_check(tmp_path: Path, driver_version: str) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "gpu.yml"
    playbook.write_text(
        "- hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - ansible.builtin.include_role:\n"
        "        name: nvidia_driver\n"
        "        tasks_from: verify-gpu.yml\n"
    )
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles")), "ANSIBLE_NOCOLOR": "1"}
    extra = {
        "nvidia_driver_version": driver_version,
        "gpu_stack": {},
        # include_role runs nvidia_driver's dependency nvidia_repository too: as if it had set it up.
        "nvidia_repository_pending": False,
        "ansible_python_interpreter": sys.executable,
    }
    command = [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)]
    return subprocess.run(
        [*command, "-e", json.dumps(extra)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_the_running_driver_passes(tmp_path: Path):
    assert DRIVER is not None
    proc = run_gpu_check(tmp_path, DRIVER)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"GPU(s) with driver {DRIVER}" in proc.stdout


def test_another_driver_fails_naming_it(tmp_path: Path):
    proc = run_gpu_check(tmp_path, "999.99.99")
    assert proc.returncode != 0
    assert "wanted driver 999.99.99" in proc.stdout
