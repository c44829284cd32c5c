"""nvidia_driver refuses, before installing, a lock the apt repositories cannot meet (setup-Debian.yml's
"Refuse a lock the repositories cannot meet", run on localhost against `apt-cache madison` lines). The case
it exists for: nvidia_driver_source: ubuntu, where Ubuntu's archive offers only Canonical's newest build."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpuprov import resources
from tests.unit.roles.local_play import role_task, run_play

TASKS = resources.data_dir("roles") / "nvidia_driver" / "tasks" / "setup-Debian.yml"
ARCHIVE = "http://archive.ubuntu.com/ubuntu jammy-updates/restricted amd64 Packages"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  Packages"


def check(
    tmp_path: Path, source: str, packages: list[str], madison: list[str]
) -> subprocess.CompletedProcess[str]:
    task = role_task("nvidia_driver", "setup-Debian.yml", "Refuse a lock")
    extra = {
        "nvidia_driver_version": "550.127.08",
        "nvidia_driver_source": source,
        "__nvidia_driver_packages": packages,
        "__nvidia_driver_madison": {"stdout_lines": madison},
    }
    return run_play(tmp_path, [task], extra)


def test_canonicals_newest_build_does_not_meet_an_nvidia_lock(tmp_path: Path) -> None:
    proc = check(
        tmp_path,
        "ubuntu",
        ["nvidia-headless-550-server", "nvidia-utils-550-server"],
        [
            f" nvidia-headless-550-server | 550.127.05-0ubuntu0.22.04.1 | {ARCHIVE}",
            f"    nvidia-utils-550-server | 550.127.05-0ubuntu0.22.04.1 | {ARCHIVE}",
        ],
    )
    assert proc.returncode != 0
    assert "nvidia-headless-550-server is offered at 550.127.05-0ubuntu0.22.04.1" in proc.stdout
    assert "set nvidia_driver_source: nvidia" in proc.stdout


def test_a_package_not_offered_at_all_is_named(tmp_path: Path) -> None:
    proc = check(
        tmp_path,
        "nvidia",
        ["nvidia-headless-550", "libnvidia-cfg1-550"],
        [f" nvidia-headless-550 | 550.127.08-0ubuntu1 | {NVIDIA}"],
    )
    assert proc.returncode != 0
    assert "libnvidia-cfg1-550 is offered at no version" in proc.stdout


def test_a_repository_with_the_locked_version_passes(tmp_path: Path) -> None:
    proc = check(
        tmp_path,
        "nvidia",
        ["nvidia-headless-550", "nvidia-utils-550"],
        [
            f" nvidia-headless-550 | 550.144.03-0ubuntu1 | {NVIDIA}",
            f" nvidia-headless-550 | 550.127.08-0ubuntu1 | {NVIDIA}",
            f"    nvidia-utils-550 | 550.127.08-0ubuntu1 | {NVIDIA}",
        ],
    )
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_a_version_that_only_starts_like_the_lock_does_not_pass(tmp_path: Path) -> None:
    proc = check(
        tmp_path, "nvidia", ["nvidia-utils-550"], [f" nvidia-utils-550 | 550.127.081-0ubuntu1 | {NVIDIA}"]
    )
    assert proc.returncode != 0
