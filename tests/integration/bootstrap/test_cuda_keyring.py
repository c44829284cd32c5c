"""A host imaged with NVIDIA's cuda-keyring (as many cloud GPU images are): bootstrap must not break apt.

The node installs the mirror's stand-in cuda-keyring (NVIDIA's file list and entry, naming the sandbox mirror
where NVIDIA's names developer.download.nvidia.com, see gpuprov.sandbox.standins.keyring).
gpuprov's own entry for the same URL with another keyring would make apt abort ("Conflicting values set
for option Signed-By"); the role adopts the entry, whose keyring holds exactly the verified key. Then an
entry of the URL signed by nothing gpuprov verified is replaced. One debian12 node; the driver and cuda
roles only (playbooks/driver_cuda.yml).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import pytest

from gpuprov.sandbox.standins.keyring import SANDBOX_REPOS_URL
from tests.integration.bootstrap.conftest import HERE, LOCK, bootstrap, on_node
from tests.integration.conftest import Sandbox, gpuprov, start_sandbox, unique_name

pytestmark = pytest.mark.integration
PLAYBOOK = HERE / "playbooks" / "driver_cuda.yml"
KEYRING_LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
GPUPROV_SOURCES = "/etc/apt/sources.list.d/nvidia-cuda.sources"


@pytest.fixture(scope="module")
def keyring_sandbox(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    sandbox = start_sandbox(unique_name("ckr"), sandbox_env, "--nodes", "1", "--os", "debian12")
    yield sandbox
    gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)


def sh(sandbox: Sandbox, script: str) -> str:
    result = on_node(sandbox, "node1", script)
    assert result.returncode == 0, f"{script}\n{result.stdout}{result.stderr}"
    return result.stdout


def run_roles(sandbox: Sandbox) -> dict[str, object]:
    result = bootstrap(sandbox, "-e", f"@{LOCK}", "--json", "--full", playbook=PLAYBOOK)
    assert result.returncode == 0, result.stderr[-3000:]
    host: dict[str, object] = result.summary()["hosts"]["node1"]
    return host


def test_host_with_cuda_keyring_converges_and_apt_keeps_working(keyring_sandbox: Sandbox) -> None:
    deb = f"{SANDBOX_REPOS_URL}/debian12/x86_64/cuda-keyring_1.1-1_all.deb"
    fetch = f"import urllib.request as u; u.urlretrieve({deb!r}, '/tmp/cuda-keyring.deb')"
    sh(keyring_sandbox, f"python3 -c {shlex.quote(fetch)} && dpkg -i /tmp/cuda-keyring.deb")
    sh(keyring_sandbox, "apt-get update -q")  # the imaged host works before gpuprov

    first = run_roles(keyring_sandbox)
    assert first["changed"] and not first["failed"]
    update = on_node(keyring_sandbox, "node1", "apt-get update -q 2>&1")
    assert update.returncode == 0 and "Conflicting" not in update.stdout and "E:" not in update.stdout, (
        update.stdout
    )
    # Adopted: cuda-keyring's entry (its keyring holds exactly the verified key) serves the roles.
    assert sh(keyring_sandbox, f"grep -c '^deb ' {KEYRING_LIST}").strip() == "1"
    assert on_node(keyring_sandbox, "node1", f"test -e {GPUPROV_SOURCES}").returncode != 0
    assert "hold ok installed" in sh(keyring_sandbox, "dpkg-query -W -f '${Status}' cuda-toolkit-12-4")
    # NVIDIA's linker entry finds the locked runtime through /usr/local/cuda's targets directory.
    lib = sh(keyring_sandbox, "readlink -f $(ldconfig -p | sed -n 's/.*libcudart.so.12 .*=> //p' | head -n1)")
    assert lib.strip() == "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.1"

    again = run_roles(keyring_sandbox)
    assert (again["changed"], again["failed"]) == (0, 0), again


def test_entry_signed_by_another_keyring_is_replaced(keyring_sandbox: Sandbox) -> None:
    other = "/etc/apt/sources.list.d/other.list"
    # An entry of the same URL that trusts whatever apt's global keyrings hold: not the verified key.
    line = shlex.quote(f"deb {SANDBOX_REPOS_URL}/debian12/x86_64/ /")
    sh(keyring_sandbox, f"dpkg --purge cuda-keyring && echo {line} > {other}")

    first = run_roles(keyring_sandbox)
    assert first["changed"] and not first["failed"]
    assert sh(keyring_sandbox, f"cat {other}").startswith("# Disabled by gpuprov")
    sources = sh(keyring_sandbox, f"cat {GPUPROV_SOURCES}")
    assert "Signed-By: /usr/share/keyrings/nvidia-cuda-archive-keyring.asc" in sources
    update = on_node(keyring_sandbox, "node1", "apt-get update -q 2>&1")
    assert update.returncode == 0 and "E:" not in update.stdout, update.stdout

    again = run_roles(keyring_sandbox)
    assert (again["changed"], again["failed"]) == (0, 0), again


def test_preflight_refuses_a_cuda_the_os_repository_lacks(keyring_sandbox: Sandbox) -> None:
    """The sample lock's CUDA 12.4.1 on an Ubuntu 24.04 host (the sandbox's way: its /etc/os-release)."""
    sh(
        keyring_sandbox,
        "cp /etc/os-release /tmp/os-release.debian && printf '%s\\n' 'NAME=\"Ubuntu\"' 'VERSION_ID=\"24.04\"'"
        " 'ID=ubuntu' 'ID_LIKE=debian' 'VERSION_CODENAME=noble' > /etc/os-release",
    )
    try:
        before = sh(keyring_sandbox, "find /etc/apt /usr/local -newer /tmp/os-release.debian | sort")
        result = bootstrap(keyring_sandbox, "-e", f"@{LOCK}", playbook=PLAYBOOK)
        assert result.returncode == 7, result.stderr
        assert "node1" in result.stderr and "os" in result.stderr
        assert "Ubuntu 24.04: NVIDIA's ubuntu2404 repository has no CUDA 12.4.1" in result.stderr
        assert "it carries CUDA 12.6.3, 12.8.1" in result.stderr
        after = sh(keyring_sandbox, "find /etc/apt /usr/local -newer /tmp/os-release.debian | sort")
        assert after == before  # nothing applied
    finally:
        sh(keyring_sandbox, "cp /tmp/os-release.debian /etc/os-release")
