"""Install the host programs gpuprov needs (Docker engine, debootstrap, rpm tools) when they are missing.

Only Debian-family build machines are handled automatically, with apt-get as root; anywhere else the
error names the packages to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from gpuprov import console
from gpuprov.errors import EnvironmentProblem

_apt_updated = False


def missing(commands: dict[str, str]) -> dict[str, str]:
    """The subset of {command: debian_package} whose command is not on PATH."""
    return {cmd: pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None}


def ensure(commands: dict[str, str], purpose: str) -> None:
    """Make sure every command is on PATH, installing its Debian package when it is not."""
    absent = missing(commands)
    if not absent:
        return
    packages = sorted(set(absent.values()))
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise EnvironmentProblem(
            f"{purpose} needs {', '.join(sorted(absent))}; install the packages {' '.join(packages)} "
            "(gpuprov installs them itself only as root on Debian or Ubuntu)"
        )
    console.step(f"Installing {' '.join(packages)} ({purpose} needs {', '.join(sorted(absent))})")
    _apt_get(["install", "-y", "--no-install-recommends", *packages])
    still = missing(absent)
    if still:
        raise EnvironmentProblem(f"installing {' '.join(packages)} did not provide {', '.join(still)}")


def _apt_get(args: list[str]) -> None:
    global _apt_updated
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not _apt_updated:
        _run_apt(["apt-get", "update"], env)
        _apt_updated = True
    _run_apt(["apt-get", *args], env)


def _run_apt(cmd: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    console.detail(proc.stdout[-2000:])
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentProblem(f"'{' '.join(cmd)}' failed: {last}")
