"""The input fingerprint of a bootstrap run on one host: a digest of everything the roles' result depends on
besides the host itself.

Two runs with the same fingerprint apply the same tasks with the same values to a host; when the host also
still holds what the last ok run left (gpuprov.bootstrap.drift), a new run has nothing to do there. What goes
in: gpuprov's and ansible-core's versions; every file of roles/ and playbooks/, and the playbook run; the
run's extra vars (after @FILE was read); the inventory (its file, or every file of its folder) with the
group_vars/ and host_vars/ beside it; the Ansible configuration files and ANSIBLE_* variables (they change
how Ansible runs); and the host's name, address, port, user and variables as loaded.

A variable with a lookup (`lookup(`, `query(`) reads something outside all of this: such a host has no
fingerprint (`None`), which the drift check reads as "run everything".
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gpuprov
from gpuprov import hosts, resources
from gpuprov.inventory_cache import files_below

FORMAT = 1  # bump when what goes in changes
CONFIG_FILES = ("./ansible.cfg", "~/.ansible.cfg", "/etc/ansible/ansible.cfg")
LOOKUP = re.compile(r"\b(lookup|query|q)\s*\(")
# Variables Ansible's loader adds that describe the controller's process, not the run's inputs: the Python
# and the working folder gpuprov runs from, Ansible's version string (its version is in the digest),
# and facts a fact cache may hold (the host's state, which the probe reads).
CONTROLLER_VARS = frozenset(
    {"ansible_playbook_python", "playbook_dir", "ansible_config_file", "ansible_version", "ansible_facts",
     "ansible_local"}
)  # fmt: skip


def _add_files(digest: Any, label: str, files: list[Path], base: Path) -> None:
    for file in files:
        try:
            data = file.read_bytes()
        except OSError:
            data = b"\0unreadable"
        name = f"{label}/{file.relative_to(base)}" if file.is_relative_to(base) else str(file)
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)


def _ansible_version() -> str:
    try:
        return importlib.metadata.version("ansible-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def code() -> str:
    """The digest of roles/ and playbooks/ (every file, by name and content)."""
    digest = hashlib.sha256()
    for kind in ("roles", "playbooks"):
        folder = resources.data_dir(kind)
        _add_files(digest, kind, files_below(folder), folder)
    return digest.hexdigest()


def shared(
    inventory: Path, extravars: Mapping[str, Any], playbook: Path, code_digest: str | None = None
) -> str:
    """The digest of what every host of the run shares: code, the playbook run (a test's own too), roles,
    inventory, extra vars."""
    digest = hashlib.sha256(f"format {FORMAT}\0gpuprov {gpuprov.__version__}\0".encode())
    digest.update(
        f"ansible-core {_ansible_version()}\0roles and playbooks {code_digest or code()}\0".encode()
    )
    _add_files(digest, "playbook", [playbook.resolve()], Path("/"))
    inventory = inventory.resolve()
    base = inventory if inventory.is_dir() else inventory.parent
    own = files_below(inventory) if inventory.is_dir() else [inventory]
    beside = [file for folder in ("group_vars", "host_vars") for file in files_below(base / folder)]
    _add_files(digest, "inventory", sorted(set(own + beside)), base)
    config = [os.environ.get("ANSIBLE_CONFIG", ""), *CONFIG_FILES]
    _add_files(digest, "config", [Path(name).expanduser() for name in config if name], Path("/"))
    ansible_env = sorted((k, v) for k, v in os.environ.items() if k.startswith("ANSIBLE_"))
    digest.update(json.dumps([ansible_env, extravars], sort_keys=True, default=str).encode())
    return digest.hexdigest()


def for_host(common: str, host: hosts.Host, extravars: Mapping[str, Any]) -> str | None:
    """The host's fingerprint, or None when a variable of the host or the run reads through a lookup."""
    if has_lookup(host.vars) or has_lookup(extravars):
        return None
    variables = {k: v for k, v in host.vars.items() if k not in CONTROLLER_VARS}
    facts = [host.name, host.address, host.port, host.user, host.become, host.become_user, variables]
    text = json.dumps(facts, sort_keys=True, default=str)
    return hashlib.sha256(f"{common}\0{text}".encode()).hexdigest()


def has_lookup(value: Any) -> bool:
    if isinstance(value, str):
        return ("{{" in value or "{%" in value) and LOOKUP.search(value) is not None
    if isinstance(value, Mapping):
        return any(has_lookup(k) or has_lookup(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_lookup(v) for v in value)
    return False
