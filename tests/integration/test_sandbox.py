"""`gpuprov sandbox` end to end: real containers, real sshd, real Ansible with host key checking on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import (
    BIN,
    Sandbox,
    facts,
    gpuprov,
    labelled_containers,
    labelled_networks,
    labelled_volumes,
    start_sandbox,
    unique_name,
)

pytestmark = pytest.mark.integration
PLAYBOOKS = Path(__file__).parent / "playbooks"


def test_ansible_reaches_every_node_with_host_keys_checked_and_become(mixed_sandbox: Sandbox):
    proc = mixed_sandbox.ansible("gpu_nodes", "-b", "-m", "ansible.builtin.command", "-a", "id -un", "-o")
    lines = sorted(line for line in proc.stdout.splitlines() if line.strip())
    assert len(lines) == 3
    for line in lines:
        assert "CHANGED" in line and line.endswith("(stdout) root"), line


def test_nodes_report_the_os_they_stand_in_for(mixed_sandbox: Sandbox):
    seen = {host: facts(mixed_sandbox, host) for host in ("node1", "node2", "node3")}
    assert seen["node1"]["ansible_distribution"] == "Debian"
    assert seen["node1"]["ansible_distribution_major_version"] == "12"
    assert seen["node2"]["ansible_distribution"] == "Ubuntu"
    assert seen["node2"]["ansible_distribution_version"] == "22.04"
    assert seen["node3"]["ansible_os_family"] == "RedHat"
    assert seen["node3"]["ansible_distribution_major_version"] == "9"
    assert seen["node3"]["ansible_pkg_mgr"] == "dnf"


def test_a_changed_host_key_is_refused(mixed_sandbox: Sandbox, tmp_path: Path):
    """The inventory really checks host keys: with a wrong key on record, Ansible must not connect."""
    known_hosts = Path(mixed_sandbox.inventory).with_name("known_hosts")
    original = known_hosts.read_text()
    other_key = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True
    )
    assert other_key.returncode == 0
    wrong = (tmp_path / "k.pub").read_text().split()[:2]
    lines = original.splitlines()
    address = lines[0].split()[0]
    known_hosts.write_text("\n".join([f"{address} {' '.join(wrong)}", *lines[1:]]) + "\n")
    try:
        # A fresh control path dir: an SSH master kept open by an earlier test would skip the key check.
        fresh = {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path / "cp")}
        proc = mixed_sandbox.ansible("node1", "-m", "ansible.builtin.ping", check=False, extra_env=fresh)
    finally:
        known_hosts.write_text(original)
    assert proc.returncode != 0
    assert "UNREACHABLE" in proc.stdout
    assert (
        "Host key verification failed" in proc.stdout
        or "REMOTE HOST IDENTIFICATION HAS CHANGED" in proc.stdout
    )


def test_mirror_installs_standin_packages_with_signatures_checked(mixed_sandbox: Sandbox):
    """apt on Debian/Ubuntu and dnf on the Rocky stand-in install from the signed sandbox mirror."""
    proc = mixed_sandbox.playbook(PLAYBOOKS / "install_from_mirror.yml")
    assert "failed=0" in proc.stdout
    nvcc = mixed_sandbox.ansible(
        "gpu_nodes", "-m", "ansible.builtin.command", "-a", "/usr/local/cuda-12.4/bin/nvcc --version", "-o"
    )
    assert nvcc.stdout.count("release 12.4, V12.4") == 3
    smi = mixed_sandbox.ansible(
        "gpu_nodes", "-m", "ansible.builtin.command", "-a", "nvidia-smi", "-o", check=False
    )
    for host in ("node1", "node2", "node3"):
        # As on a host without a GPU: the message, and nvidia-smi's exit status 6.
        assert f"{host} | FAILED | rc=6 | (stdout) No devices were found" in smi.stdout


def test_up_again_changes_nothing_and_says_so(mixed_sandbox: Sandbox):
    before = sorted(mixed_sandbox.containers())
    proc = mixed_sandbox.gpuprov("sandbox", "up", "--nodes", "3", "--os", "debian12,ubuntu22.04,rocky9")
    assert "already up with 3 nodes" in proc.stderr
    assert sorted(mixed_sandbox.containers()) == before


def test_up_refuses_to_change_the_os_of_a_node(mixed_sandbox: Sandbox):
    proc = mixed_sandbox.gpuprov("sandbox", "up", "--nodes", "3", "--os", "rocky9", check=False)
    assert proc.returncode == 2
    assert "already has node1 running debian12, not rocky9" in proc.stderr


def test_repeated_up_adds_a_node_then_down_leaves_nothing(sandbox_env: dict[str, str]):
    name = unique_name("grow")
    sandbox = start_sandbox(name, sandbox_env, "--nodes", "1")
    state = Path(sandbox.inventory).parent
    try:
        sandbox.gpuprov("sandbox", "up", "--nodes", "2", "--os", "debian12,rocky9")
        assert len(sandbox.containers()) == 3  # two nodes and the mirror
        assert len(labelled_volumes(name)) == 4  # each node's /var/lib/docker and /var/lib/containers
        proc = sandbox.ansible("gpu_nodes", "-m", "ansible.builtin.ping", "-o")
        assert proc.stdout.count("SUCCESS") == 2
    finally:
        started = time.monotonic()
        sandbox.gpuprov("sandbox", "down")
        took = time.monotonic() - started
    assert labelled_containers(name) == []
    assert labelled_networks(name) == []
    assert labelled_volumes(name) == []
    assert not state.exists()
    assert took < 30  # generous bound against hangs; the benchmark tracks the real figure


def test_name_clash_with_a_foreign_container_creates_nothing(
    sandbox_env: dict[str, str], mixed_sandbox: Sandbox
):
    name = unique_name("clash")
    image = subprocess.run(
        ["docker", "inspect", "-f", "{{.Config.Image}}", f"gpuprov-{mixed_sandbox.name}-node1"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    foreign = f"gpuprov-{name}-node2"
    subprocess.run(["docker", "create", "--name", foreign, image], check=True, capture_output=True)
    try:
        proc = gpuprov("sandbox", "up", "--name", name, env=sandbox_env, check=False)
        assert proc.returncode == 4, proc.stderr
        assert (
            f"a docker container named '{foreign}' already exists and belongs to something other than gpuprov"
            in proc.stderr
        )
        assert labelled_containers(name) == []
        assert labelled_networks(name) == []
        assert labelled_volumes(name) == []
        assert not (Path(sandbox_env["GPUPROV_STATE_DIR"]) / "sandboxes" / name).exists()
    finally:
        subprocess.run(["docker", "rm", "-f", foreign], capture_output=True)


def test_ctrl_c_during_up_leaves_no_half_created_sandbox(sandbox_env: dict[str, str], mixed_sandbox: Sandbox):
    name = unique_name("intr")
    proc = subprocess.Popen(
        [str(BIN / "gpuprov"), "sandbox", "up", "--name", name, "--nodes", "2"],
        env=sandbox_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not labelled_containers(name) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "up finished before it could be interrupted"
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert labelled_containers(name) == []
    assert labelled_networks(name) == []
    assert labelled_volumes(name) == []
    assert not (Path(sandbox_env["GPUPROV_STATE_DIR"]) / "sandboxes" / name).exists()
