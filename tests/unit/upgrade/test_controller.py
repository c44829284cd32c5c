"""The Slurm controller of an upgrade: found in [slurm_controller] whether or not it is a GPU node, in the
batches only when it is one of the hosts upgraded (gpuprov.upgrade.core)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuprov import hosts
from gpuprov.errors import BadInput
from gpuprov.upgrade import core, state
from tests.unit import in_process
from tests.unit.upgrade.locks import LOCK_A, LOCK_B

KNOWN = "ansible_ssh_common_args='-o UserKnownHostsFile=/dev/null'"


def _inventory(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.ini"
    path.write_text(text)
    return path


def test_a_controller_outside_gpu_nodes_drains_but_is_never_in_a_batch(tmp_path: Path) -> None:
    path = _inventory(
        tmp_path,
        f"[gpu_nodes]\ngpu01 ansible_host=10.0.0.11\ngpu02 ansible_host=10.0.0.12\n\n"
        f"[slurm_controller]\nhead ansible_host=10.0.0.2 ansible_user=ops\n\n[all:vars]\n{KNOWN}\n",
    )
    inventory = hosts.load(path)
    controller = core._controller(inventory)
    assert controller is not None and (controller.name, controller.address, controller.user) == (
        "head", "10.0.0.2", "ops",
    )  # fmt: skip
    assert inventory.names == ["gpu01", "gpu02"] and core._in_batches(controller, inventory) is None


def test_a_controller_among_the_gpu_nodes_goes_last_unless_limit_left_it_out(tmp_path: Path) -> None:
    path = _inventory(
        tmp_path,
        "[gpu_nodes]\ngpu01 ansible_host=10.0.0.11\ngpu02 ansible_host=10.0.0.12\n\n"
        "[slurm_controller]\ngpu01\n",
    )
    whole = hosts.load(path)
    assert core._in_batches(core._controller(whole), whole) == "gpu01"
    limited = hosts.load(path, "gpu02")
    controller = core._controller(limited)  # still drained through, though not upgraded
    assert controller is not None and controller.name == "gpu01"
    assert core._in_batches(controller, limited) is None


def test_no_controller_group_is_no_slurm_and_two_controllers_are_refused(tmp_path: Path) -> None:
    plain = hosts.load(_inventory(tmp_path, "[gpu_nodes]\ngpu01 ansible_host=10.0.0.11\n"))
    assert core._controller(plain) is None
    two = hosts.load(
        _inventory(tmp_path, "[gpu_nodes]\ngpu01 ansible_host=10.0.0.11\n\n[slurm_controller]\nh1\nh2\n")
    )
    with pytest.raises(BadInput, match=r"group \[slurm_controller\] has h1, h2; Slurm has one controller"):
        core._controller(two)


def test_a_resumed_rollout_drains_through_the_controller_it_recorded(tmp_path: Path) -> None:
    path = _inventory(
        tmp_path,
        f"[gpu_nodes]\ngpu01 ansible_host=10.0.0.11\n\n[slurm_controller]\nhead\n\n[all:vars]\n{KNOWN}\n",
    )
    inventory = hosts.load(path)
    recorded = state.Rollout(tmp_path, {"id": "r1", "slurm": True, "controller": "head"})
    controller = core._recorded_controller(recorded, inventory)
    assert controller is not None and controller.name == "head"
    assert core._recorded_controller(state.Rollout(tmp_path, {"id": "r0", "slurm": False}), inventory) is None
    moved = state.Rollout(tmp_path, {"id": "r2", "slurm": True, "controller": "head-old"})
    with pytest.raises(
        BadInput, match=r"through the Slurm controller head-old, and the inventory's .* is head"
    ):
        core._recorded_controller(moved, inventory)


def test_the_dry_run_names_the_head_node_it_drains_through(tmp_path: Path) -> None:
    """Files only: --dry-run contacts no host (the addresses are from TEST-NET-1, RFC 5737)."""
    _inventory(
        tmp_path,
        "[gpu_nodes]\ngpu01 ansible_host=192.0.2.11\ngpu02 ansible_host=192.0.2.12\n\n"
        f"[slurm_controller]\nhead ansible_host=192.0.2.2\n\n[all:vars]\n{KNOWN}\n",
    )
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "gpu_stack.yml").write_text(yaml.safe_dump({"gpu_stack": LOCK_A}))
    (tmp_path / "b.yml").write_text(yaml.safe_dump({"gpu_stack": LOCK_B}))
    env = {"GPUPROV_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    shown = in_process.gpuprov("upgrade", "b.yml", "inventory.ini", "--dry-run", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "Slurm: drained and resumed through its controller head, which is in no batch" in shown.stderr
    done = in_process.gpuprov(
        "upgrade", "b.yml", "inventory.ini", "--dry-run", "--json", cwd=tmp_path, env=env
    )
    plan = json.loads(done.stdout.splitlines()[0])
    assert plan["batches"] == [["gpu01"], ["gpu02"]] and plan["controller"] == "head"
