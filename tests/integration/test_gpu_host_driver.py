"""The nvidia_driver role on a GPU host, cheaply: one ubuntu22.04 (stand-in) sandbox node that presents two
NVIDIA GPUs on the PCI bus (a tmpfs over /sys/bus/pci/devices holding two H100 SXM5 80GB's PCI ids, from a
recorded nvidia-smi -q: tests/integration/standin_gpus.py), simulated GPUs for the stand-in nvidia-smi
and nvidia-persistenced (/etc/gpuprov/standin-gpus.conf), and a loaded driver (a tmpfs over /proc/driver
holding a recorded /proc/driver/nvidia/version of the open module, tests/recorded).

The role converges, a second run changes nothing, persistence mode is on and no reboot is asked for while
the locked driver is the loaded one; with an older driver loaded the host is marked for a reboot, naming
both versions.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov import resources
from gpuprov.sandbox.cluster import LABEL, ROLE_LABEL
from gpuprov.sandbox.inventory import SANDBOX_LOCK
from tests.integration import standin_gpus
from tests.integration.conftest import Sandbox, gpuprov, start_sandbox, unique_name

pytestmark = pytest.mark.integration

RECORDED = Path(__file__).parents[1] / "recorded" / "proc-driver-nvidia-version" / "open-x86_64-565.57.01"
LOCKED = SANDBOX_LOCK["driver_version"]
OLDER = "550.90.07"
MARKER = "/var/lib/gpuprov/reboot-required"

PLAYBOOK = """\
- name: Install the NVIDIA driver
  hosts: gpu_nodes
  become: true
  roles:
    - role: nvidia_driver
"""


@pytest.fixture(scope="module")
def gpu_host(sandbox_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    sandbox = start_sandbox(unique_name("gpuhost"), sandbox_env, "--nodes", "1", "--os", "ubuntu22.04")
    try:
        node_shell(
            sandbox,
            # Two H100 SXM5 80GB on the PCI bus as sysfs shows them, and for the stand-in nvidia-smi.
            *standin_gpus.H100_SXM5_80GB.present(2),
            "mount -t tmpfs tmpfs /proc/driver && mkdir /proc/driver/nvidia",
        )
        yield sandbox
    finally:
        gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)


def node_shell(sandbox: Sandbox, *commands: str) -> str:
    (container,) = subprocess.run(
        [
            "docker",
            "ps",
            "-q",
            "--filter",
            f"label={LABEL}={sandbox.name}",
            "--filter",
            f"label={ROLE_LABEL}=node",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    proc = subprocess.run(
        ["docker", "exec", container, "sh", "-ec", " && ".join(commands)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def load_driver(sandbox: Sandbox, version: str) -> None:
    """Present the recorded open-module version file, with `version` as the loaded driver's."""
    text = RECORDED.read_text().replace("565.57.01", version)
    node_shell(sandbox, f"printf '%s' '{text}' > /proc/driver/nvidia/version")


def converge(sandbox: Sandbox, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "driver.yml"
    playbook.write_text(PLAYBOOK)
    if not (tmp_path / "roles").exists():  # Ansible finds roles/ beside the playbook
        (tmp_path / "roles").symlink_to(resources.data_dir("roles"))
    # GPUs on this host: nvidia-smi must find them.
    return sandbox.playbook(playbook, "-e", "nvidia_driver_allow_no_gpu=false", check=False)


def changed(proc: subprocess.CompletedProcess[str]) -> int:
    return int(re.search(r"changed=(\d+)", proc.stdout[proc.stdout.rindex("PLAY RECAP") :]).group(1))


def test_converges_with_persistence_on_and_no_reboot_when_the_locked_driver_is_loaded(
    gpu_host: Sandbox, tmp_path: Path
) -> None:
    load_driver(gpu_host, LOCKED)
    first = converge(gpu_host, tmp_path)
    assert first.returncode == 0, first.stdout[-6000:]
    second = converge(gpu_host, tmp_path)
    assert second.returncode == 0, second.stdout[-6000:]
    assert changed(second) == 0, second.stdout[-6000:]
    assert "Reboot required" not in second.stdout
    assert node_shell(gpu_host, f"test ! -e {MARKER} && echo absent") == "absent\n"
    assert node_shell(gpu_host, "nvidia-smi --query-gpu=persistence_mode --format=csv,noheader") == (
        "Enabled\nEnabled\n"
    )
    # The compute-only set, without the X server driver.
    installed = node_shell(gpu_host, "dpkg-query -W -f '${Package}\\n' 'nvidia-*' 'xserver-*' || true")
    branch = SANDBOX_LOCK["driver_branch"]
    assert f"nvidia-headless-{branch}-open" in installed.split()
    assert f"xserver-xorg-video-nvidia-{branch}" not in installed.split()


def test_an_older_loaded_driver_asks_for_a_reboot_naming_both(gpu_host: Sandbox, tmp_path: Path) -> None:
    load_driver(gpu_host, OLDER)
    proc = converge(gpu_host, tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:]
    reason = f"driver {LOCKED} is installed but driver {OLDER} is loaded"
    assert reason in proc.stdout
    assert node_shell(gpu_host, f"cat {MARKER}") == reason + "\n"
