"""nvidia_driver on a rocky9 STAND-IN node whose dnf already has another nvidia-driver stream enabled.

The mirror's rhel9 repository carries NVIDIA's module metadata (gpuprov.sandbox.rpm_modules), so the node's
dnf (Debian's, with module support) behaves as on Rocky: latest-dkms is the default stream, and `dnf module
enable` refuses to move from an enabled stream. A first run locks branch 570 (proprietary: stream 570-dkms),
as an earlier lock would have; the run with the sandbox's lock (580, open) must switch to 580-open, converge,
version-lock the whole *nvidia*580* tree, and change nothing when run again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuprov.sandbox import standins
from gpuprov.sandbox.inventory import SANDBOX_LOCK
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration
PLAYBOOK = Path(__file__).parent / "playbooks" / "nvidia_driver.yml"
OLD = next(d for d in standins.CATALOGUE.drivers if d.branch == "570")
BRANCH, VERSION = SANDBOX_LOCK["driver_branch"], SANDBOX_LOCK["driver_version"]


def apply(node: Sandbox, lock: dict[str, str]) -> str:
    proc = node.playbook(PLAYBOOK, "-e", json.dumps({"gpu_stack": lock}), check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.stdout


def recap(output: str) -> dict[str, int]:
    line = next(line for line in output.splitlines() if line.startswith("node1 "))
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}


def shell(node: Sandbox, command: str) -> str:
    proc = node.ansible("node1", "-b", "-m", "ansible.builtin.shell", "-a", command)
    return proc.stdout.split(">>", 1)[1].strip()


def enabled_stream(node: Sandbox) -> str:
    return shell(node, "sed -n 's/^stream=//p' /etc/dnf/modules.d/nvidia-driver.module")


def test_switches_from_an_enabled_stream_to_the_locked_one(rocky: Sandbox) -> None:
    old_lock = {**SANDBOX_LOCK, "driver_branch": OLD.branch, "driver_version": OLD.version}
    apply(rocky, {**old_lock, "driver_flavor": "proprietary"})
    assert enabled_stream(rocky) == "570-dkms"
    assert "kmod-nvidia-latest-dkms-570" in shell(rocky, "rpm -qa 'kmod-nvidia*'")

    first = apply(rocky, SANDBOX_LOCK)
    assert recap(first)["failed"] == 0
    assert enabled_stream(rocky) == f"{BRANCH}-open"
    installed = shell(rocky, "rpm -qa --qf '%{NAME} %{VERSION}\\n' '*nvidia*' | sort")
    assert f"kmod-nvidia-open-dkms {VERSION}" in installed
    assert "570" not in installed and "kmod-nvidia-latest-dkms" not in installed

    # The whole tree is locked at its installed version, the old branch's locks are gone.
    locks = shell(rocky, "dnf -q versionlock list").splitlines()
    tree = shell(
        rocky, "rpm -qa --qf '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}.*\\n' '*nvidia*'"
    ).splitlines()
    assert tree and set(tree) <= set(locks)
    # ...also the packages the role does not name, which its packages depend on.
    assert any(entry.startswith(f"nvidia-kmod-common-3:{VERSION}-") for entry in locks)
    assert any(entry.startswith(f"nvidia-driver-cuda-libs-3:{VERSION}-") for entry in locks)
    assert not [entry for entry in locks if ":570." in entry]

    again = apply(rocky, SANDBOX_LOCK)
    assert recap(again)["changed"] == 0, again[-3000:]
