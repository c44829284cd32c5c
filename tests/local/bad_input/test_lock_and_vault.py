"""Bad input that real Ansible tools must see: a lock value looked up by a plain `ansible-playbook` run of
playbooks/validate_inventory_and_lock.yml, and vars files encrypted by `ansible-vault`. The other cases of
the same kind, which start no Ansible program, are in tests/unit/bad_input/test_bootstrap_inventory_sandbox.py
(its inventory and lock helpers are shared from there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.errors import BadInput
from tests.unit.bad_input.test_bootstrap_inventory_sandbox import SECRET, _lock_with, inventory

REPO = Path(__file__).resolve().parents[3]


def test_playbook_check_never_echoes_a_looked_up_lock_value(tmp_path: Path) -> None:
    """playbooks/validate_inventory_and_lock.yml (plain ansible-playbook): Ansible resolves the lookup, the
    check refuses what it got without printing it."""
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    path = inventory(tmp_path / "inv")
    (tmp_path / "inv" / "group_vars" / "all" / "gpu_stack.yml").write_text(
        _lock_with("cuda_version", f"\"{{{{ lookup('file', '{secret_file}') }}}}\"")
    )
    playbook = REPO / "playbooks" / "validate_inventory_and_lock.yml"
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "False"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(path), str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode != 0, proc.stdout
    assert "gpu_stack.cuda_version is a value that is not a version (not shown)" in proc.stdout, proc.stdout
    assert "s3cret" not in proc.stdout + proc.stderr


def test_vault_encrypted_vars_file_is_left_to_ansible(tmp_path: Path) -> None:
    """An encrypted file is one text block to a YAML parser: it is not mistaken for a scalar vars file."""
    path = inventory(tmp_path)
    vault = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-vault"), "encrypt_string", "--name", "x", "s3cret"],
        capture_output=True,
        text=True,
        env={**os.environ, "ANSIBLE_VAULT_PASSWORD_FILE": str(_password(tmp_path))},
        check=True,
    )
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node1.yml").write_text(vault.stdout)  # a mapping with a !vault value
    encrypted = tmp_path / "group_vars" / "all" / "secret.yml"
    encrypted.write_text("become_secret: s3cret\n")
    subprocess.run(
        [str(Path(sys.executable).parent / "ansible-vault"), "encrypt", str(encrypted)],
        capture_output=True,
        env={**os.environ, "ANSIBLE_VAULT_PASSWORD_FILE": str(_password(tmp_path))},
        check=True,
    )
    with pytest.raises(BadInput) as info:  # gpuprov has no vault password: Ansible's own error, not ours
        hosts.load(path)
    assert "a vars file is a mapping" not in info.value.message


def _password(tmp_path: Path) -> Path:
    password = tmp_path / "vault-password"
    password.write_text("pw\n")
    return password
