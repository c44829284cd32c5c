"""The sandbox lock is written once, playbooks/vars/sandbox_lock.yml: the sandbox inventory (SANDBOX_LOCK)
and each Molecule scenario's inventory read it, so they cannot drift apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuprov import resources
from gpuprov.sandbox.inventory import SANDBOX_LOCK, render_lock

ROOT = resources.data_dir("playbooks").parent
SCENARIOS = sorted((ROOT / "molecule").glob("*/molecule.yml"))
SOURCE = yaml.safe_load((ROOT / "playbooks" / "vars" / "sandbox_lock.yml").read_text())["gpu_stack"]
# Scenarios that lock something else on purpose, and only that (the rest still comes from the file).
OVERRIDES = {"nvidia_driver": {"driver_branch": "590", "driver_version": "590.48.01"}}


def test_the_sandbox_inventory_writes_the_file_s_lock() -> None:
    assert {k: str(v) for k, v in SOURCE.items()} == SANDBOX_LOCK
    assert yaml.safe_load(render_lock())["gpu_stack"] == SANDBOX_LOCK


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.parent.name)
def test_molecule_reads_the_file(scenario: Path, tmp_path: Path) -> None:
    """The scenario's group_vars, resolved by Ansible as Molecule runs it (MOLECULE_PROJECT_DIRECTORY set)."""
    group_vars = yaml.safe_load(scenario.read_text())["provisioner"]["inventory"]["group_vars"]["all"]
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node1": None}, "vars": group_vars}}))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "-i", str(inventory), "node1", "-c", "local",
         "-m", "ansible.builtin.debug", "-a", "var=gpu_stack",
         "-e", f"ansible_python_interpreter={sys.executable}"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "MOLECULE_PROJECT_DIRECTORY": str(ROOT), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shown = json.loads(proc.stdout.split("=>", 1)[1])["gpu_stack"]
    assert shown == {**SANDBOX_LOCK, **OVERRIDES.get(scenario.parent.name, {})}
