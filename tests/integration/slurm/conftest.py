"""A Slurm cluster on node1 and node2 of the Debian sandbox that the launch tests use (deb_sandbox, made
ready by first_bootstrap): the slurm role installs Debian 12's real Slurm and munge packages there, from the
sandbox mirror's copy of Debian's archive. node1 is the controller and both nodes run slurmd, with the
container-safe settings (`gpuprov sandbox up --slurm` writes the same inventory lines)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov import resources
from gpuprov.sandbox import cluster
from tests.integration.conftest import BootstrapRun, Sandbox, run_ansible
from tests.integration.launch.conftest import two_node_inventory

PLAYBOOK = Path(__file__).resolve().parents[1] / "playbooks" / "slurm.yml"
SLURM_NODES = ("node1", "node2")  # the two nodes of the Slurm cluster the tests share
SLURM_LINES = "[slurm_controller]\nnode1\n\n[all:vars]\nslurm_container_safe=true\nslurm_allow_no_gpu=true\n"


def with_slurm(inventory: Path, name: str) -> Path:
    """A copy of inventory (beside it, so its group_vars apply) with the --slurm lines added."""
    target = inventory.parent / name
    target.write_text(inventory.read_text() + "\n" + SLURM_LINES)
    return target


def run_slurm_play(sandbox: Sandbox, inventory: Path, *args: str) -> tuple[int, str]:
    env = {**sandbox.env, "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles")), "ANSIBLE_PIPELINING": "1"}
    proc = run_ansible("ansible-playbook", "-i", str(inventory), str(PLAYBOOK), *args, env=env, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def slurm_cluster(deb_sandbox: Sandbox, first_bootstrap: BootstrapRun) -> Iterator[Sandbox]:
    """node1 + node2 with Slurm, installed by the role once per session."""
    assert first_bootstrap.returncode == 0, f"bootstrap of the Slurm hosts failed:\n{first_bootstrap.stderr}"
    inventory = with_slurm(two_node_inventory(deb_sandbox), "slurm-inventory.ini")
    code, output = run_slurm_play(deb_sandbox, inventory)
    assert code == 0, output
    yield Sandbox(deb_sandbox.name, inventory, {**deb_sandbox.env, "GPUPROV_INVENTORY": str(inventory)})


def node_container(sandbox: Sandbox, node: str) -> str:
    return cluster.container_name(sandbox.name, node)
