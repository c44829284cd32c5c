"""python_env and network_tuning on a real sandbox node: the failure paths and the rebuild rule.

The converge / idempotence / verify runs on three OSes are the Molecule scenario molecule/network_python.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from gpuprov.sandbox.mirror import UV_VERSION
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration
PLAYBOOKS = Path(__file__).parent / "playbooks"
LOCK = json.dumps(
    {"gpu_stack": {"pytorch_version": "2.13.0", "pytorch_cuda_tag": "cpu", "cuda_version": "12.4.1"}}
)


def shell(sandbox: Sandbox, command: str) -> str:
    proc = sandbox.ansible("node1", "-b", "-m", "ansible.builtin.shell", "-a", command)
    return proc.stdout.split(">>", 1)[1].strip()


def recap(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("node1 "))


def test_conda_installer_with_a_wrong_checksum_fails_and_leaves_nothing(node: Sandbox):
    """The mirror's STAND-IN Miniforge installer, announced with a wrong sha256."""
    proc = node.playbook(
        PLAYBOOKS / "python_env.yml",
        "-e", LOCK,
        "-e", json.dumps({"python_env_manager": "conda", "python_env_conda_installer_sha256": "0" * 64}),
        check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "installing Miniforge failed" in proc.stdout
    assert "checksum" in proc.stdout.lower()
    left = shell(
        node,
        "ls -d /opt/gpuprov/miniforge3 /var/tmp/gpuprov-miniforge-installer.sh /opt/gpuprov/envs/train "
        "/etc/ansible/facts.d/gpuprov_python_env.fact 2>/dev/null; echo end",
    )
    assert left == "end"


def test_the_environment_is_rebuilt_only_when_its_spec_changes(node: Sandbox):
    """Without PyTorch, to keep it quick (the Molecule scenario installs PyTorch itself)."""
    spec = {"python_env_pytorch": False, "python_env_pip_packages": ["numpy"]}
    first = node.playbook(PLAYBOOKS / "python_env.yml", "-e", LOCK, "-e", json.dumps(spec))
    assert "failed=0" in recap(first.stdout)
    fact = json.loads(shell(node, "cat /etc/ansible/facts.d/gpuprov_python_env.fact"))
    assert fact["manager"] == "venv" and fact["installer"] == "pip" and fact["torch_version"] is None
    shell(node, "touch /opt/gpuprov/envs/train/marker")

    same = node.playbook(PLAYBOOKS / "python_env.yml", "-e", LOCK, "-e", json.dumps(spec))
    assert "changed=0" in recap(same.stdout)
    assert shell(node, "ls /opt/gpuprov/envs/train/marker") == "/opt/gpuprov/envs/train/marker"

    changed = {**spec, "python_env_pip_packages": ["numpy", "wheel"]}
    rebuilt = node.playbook(PLAYBOOKS / "python_env.yml", "-e", LOCK, "-e", json.dumps(changed))
    assert "failed=0" in recap(rebuilt.stdout)
    assert shell(node, "ls /opt/gpuprov/envs/train/marker 2>/dev/null; echo end") == "end"
    new_fact = json.loads(shell(node, "cat /etc/ansible/facts.d/gpuprov_python_env.fact"))
    assert new_fact["spec_hash"] != fact["spec_hash"]
    assert shell(node, "/opt/gpuprov/envs/train/bin/python -c 'import wheel, numpy; print(1)'") == "1"

    # The installer is part of the spec: the same packages installed by uv (the mirror's uv wheel) rebuild.
    shell(node, "touch /opt/gpuprov/envs/train/marker")
    with_uv = {**changed, "python_env_venv_installer": "uv"}
    by_uv = node.playbook(PLAYBOOKS / "python_env.yml", "-e", LOCK, "-e", json.dumps(with_uv))
    assert "failed=0" in recap(by_uv.stdout)
    assert shell(node, "ls /opt/gpuprov/envs/train/marker 2>/dev/null; echo end") == "end"
    uv_fact = json.loads(shell(node, "cat /etc/ansible/facts.d/gpuprov_python_env.fact"))
    assert uv_fact["installer"] == "uv" and uv_fact["spec_hash"] != new_fact["spec_hash"]
    assert shell(node, "grep '^uv = ' /opt/gpuprov/envs/train/pyvenv.cfg") == f"uv = {UV_VERSION}"
    assert shell(node, "/opt/gpuprov/envs/train/bin/python -c 'import wheel, numpy; print(1)'") == "1"


def test_an_unknown_nccl_interface_fails_naming_the_host_and_its_interfaces(node: Sandbox):
    proc = node.playbook(
        PLAYBOOKS / "network_tuning.yml", "-e", "network_tuning_nccl_socket_ifname=ib9", check=False
    )
    assert proc.returncode != 0
    assert "node1: NCCL_SOCKET_IFNAME 'ib9' names no interface" in proc.stdout
    assert "it has eth0, lo" in proc.stdout
    assert shell(node, "ls /etc/nccl.conf 2>/dev/null; echo end") == "end"


def test_the_firewall_lets_cluster_nodes_in_and_keeps_others_out(node: Sandbox):
    """After network_tuning, the mirror (not a cluster node) reaches SSH but not the rendezvous port."""
    proc = node.playbook(PLAYBOOKS / "network_tuning.yml", "-e", "network_tuning_nccl_socket_ifname=eth0")
    assert "failed=0" in recap(proc.stdout)
    address = shell(node, "hostname -I").split()[0]
    shell(
        node,
        "nohup timeout 30 python3 -c \"import socket; s=socket.create_server(('0.0.0.0', 29500)); "
        "c,_=s.accept(); c.sendall(b'ok')\" >/dev/null 2>&1 &",
    )
    probe = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(('{address}', int(sys.argv[1])), 3).close(); print('open')\n"
        "except OSError as e:\n"
        "    print('blocked', type(e).__name__)\n"
    )
    mirror = f"gpuprov-{node.name}-mirror"

    def from_mirror(port: int) -> str:
        return subprocess.run(
            ["docker", "exec", mirror, "python3", "-c", probe, str(port)],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    assert from_mirror(22) == "open"
    assert from_mirror(29500).startswith("blocked")
    # The node itself (a cluster node) does get through.
    connect = f"import socket; print(socket.create_connection(('{address}', 29500), 3).recv(2).decode())"
    assert shell(node, f'python3 -c "{connect}"') == "ok"


def test_a_limited_run_reads_the_peers_outside_it_and_keeps_an_unreachable_one(node: Sandbox, tmp_path: Path):
    """`--limit node1` with two more hosts in gpu_nodes: `again` is node1 under another name (its addresses
    are read over SSH, as a peer outside the limit's), `gone` has an address nothing answers on. The run
    succeeds, names `gone`, and lets its ansible_host in (ufw: the rules of earlier runs stay in any case)."""
    address = shell(node, "hostname -I").split()[0]
    gone = ".".join([*address.split(".")[:3], "250"])
    extra = tmp_path / "peers.ini"
    extra.write_text(
        f"[gpu_nodes]\nagain ansible_host={address}\ngone ansible_host={gone} ansible_ssh_timeout=3\n"
    )
    proc = node.playbook(PLAYBOOKS / "network_tuning.yml", "-i", str(extra), "--limit", "node1",
                         "-e", "network_tuning_nccl_socket_ifname=eth0")  # fmt: skip
    assert "failed=0" in recap(proc.stdout) and "unreachable=0" in recap(proc.stdout)
    # Ansible shows a delegated host with its address: "ok: [node1 -> again(172.18.0.2)] => (item=again)".
    assert re.search(r"^ok: \[node1 -> again[^\]]*\] => \(item=again\)", proc.stdout, re.MULTILINE), (
        proc.stdout
    )
    assert "could not read the addresses of gone" in " ".join(proc.stdout.split())
    rules = shell(node, "ufw status")
    assert any(gone in line and "29400:29599/tcp" in line for line in rules.splitlines()), rules
