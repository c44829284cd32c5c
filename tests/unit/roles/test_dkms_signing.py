"""nvidia_driver refuses Secure Boot signing on a dkms older than 3.0.4 (tasks/dkms-signing.yml, the "Note"
and "Refuse" tasks run on localhost against `dkms --version` outputs): dkms reads mok_signing_key,
mok_certificate and /etc/dkms/framework.conf.d/ only from 3.0.4 on (dell/dkms, tag v3.0.4), and Ubuntu
20.04/22.04 ship 2.8.x, so there the setting would be ignored and the modules built unsigned."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from gpuprov import resources
from tests.unit.roles.local_play import run_play

TASKS = resources.data_dir("roles") / "nvidia_driver" / "tasks" / "dkms-signing.yml"


def check(tmp_path: Path, dkms_says: str) -> subprocess.CompletedProcess[str]:
    tasks = [
        t
        for t in yaml.safe_load(TASKS.read_text())
        if t["name"].startswith(("Note the DKMS", "Refuse a DKMS"))
    ]
    assert len(tasks) == 2
    return run_play(
        tmp_path, tasks, {"__nvidia_driver_dkms_version_out": {"rc": 0, "stdout": dkms_says, "stderr": ""}}
    )


@pytest.mark.parametrize("dkms_says", ["dkms-2.8.1", "dkms-2.8.7", "dkms-3.0.3"])
def test_an_older_dkms_is_refused_naming_its_version(tmp_path: Path, dkms_says: str) -> None:
    proc = check(tmp_path, dkms_says)
    assert proc.returncode != 0
    assert f"its dkms ({dkms_says.removeprefix('dkms-')}) is older than 3.0.4" in proc.stdout


@pytest.mark.parametrize("dkms_says", ["dkms-3.0.4", "dkms-3.0.10", "dkms-3.0.11"])
def test_dkms_3_0_4_and_newer_pass(tmp_path: Path, dkms_says: str) -> None:
    proc = check(tmp_path, dkms_says)
    assert proc.returncode == 0, proc.stdout[-2000:]
