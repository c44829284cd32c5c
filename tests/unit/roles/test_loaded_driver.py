"""The nvidia_driver role's reading of the loaded driver (files/loaded-driver.sh) against recorded real
/proc/driver/nvidia/version files of the open and the proprietary module on x86_64 and aarch64
(tests/recorded/proc-driver-nvidia-version/SOURCES.md). Reading `86` or `64` from the open module's
"for x86_64" once marked every open-module host for a reboot on every run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuprov import resources

SCRIPT = resources.data_dir("roles") / "nvidia_driver" / "files" / "loaded-driver.sh"
RECORDED = Path(__file__).parents[2] / "recorded" / "proc-driver-nvidia-version"


def loaded(version_file: Path, nouveau_dir: Path) -> str:
    proc = subprocess.run(
        ["sh", str(SCRIPT), str(version_file), str(nouveau_dir)], capture_output=True, text=True, check=True
    )
    return proc.stdout


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("proprietary-x86_64-384.98", "384.98"),
        ("open-x86_64-565.57.01", "565.57.01"),
        ("open-x86_64-525.60.11", "525.60.11"),
        ("open-aarch64-35.3.1", "35.3.1"),
    ],
)
def test_proc_files_give_the_module_version(tmp_path: Path, name: str, version: str) -> None:
    assert loaded(RECORDED / name, tmp_path / "no-nouveau") == f"{version} no\n"


@pytest.mark.parametrize(
    ("name", "version"),
    [("dmesg-open-aarch64-580.95.05", "580.95.05"), ("dmesg-proprietary-aarch64-535.161.07", "535.161.07")],
)
def test_aarch64_datacenter_builds_give_the_module_version(tmp_path: Path, name: str, version: str) -> None:
    # The /proc file's first line is the kernel log's module id after "NVRM version: " (SOURCES.md).
    module_id = (RECORDED / name).read_text().removeprefix("NVRM: loading ")
    proc_file = tmp_path / "version"
    proc_file.write_text(f"NVRM version: {module_id}GCC version:  gcc version 12.3.0\n")
    assert loaded(proc_file, tmp_path / "no-nouveau") == f"{version} no\n"


def test_no_driver_and_nouveau_loaded(tmp_path: Path) -> None:
    (tmp_path / "nouveau").mkdir()
    assert loaded(tmp_path / "absent", tmp_path / "nouveau") == "none yes\n"


def test_the_compiler_line_is_not_read_as_a_version(tmp_path: Path) -> None:
    proc_file = tmp_path / "version"
    proc_file.write_text("GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) Kernel Module 1.2\n")
    assert loaded(proc_file, tmp_path / "no-nouveau") == "none no\n"
