"""The INI inventory a sandbox writes for Ansible and for gpuprov's own commands."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NodeEntry:
    name: str
    address: str
    os_name: str


@dataclass(frozen=True)
class InventoryContext:
    sandbox: str
    user: str
    private_key: Path
    known_hosts: Path
    mirror_url: str
    mirror_key_fingerprint: str


def render(nodes: list[NodeEntry], ctx: InventoryContext) -> str:
    # Host key checking stays on: the known_hosts file holds the keys gpuprov generated for each node.
    ssh_args = f"-o UserKnownHostsFile={ctx.known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
    lines = [
        f"# Sandbox {ctx.sandbox!r}, written by `gpuprov sandbox up`; `gpuprov sandbox down` removes it.",
        "# The nodes are containers standing in for GPU servers (see the README).",
        "[gpu_nodes]",
    ]
    for node in nodes:
        lines.append(f"{node.name} ansible_host={node.address} gpuprov_sandbox_os={node.os_name}")
    lines += [
        "",
        "[gpu_nodes:vars]",
        f"ansible_user={ctx.user}",
        f"ansible_ssh_private_key_file={ctx.private_key}",
        f"ansible_ssh_common_args={shlex.quote(ssh_args)}",
        "ansible_python_interpreter=/usr/bin/python3",
        f"gpuprov_known_hosts_file={ctx.known_hosts}",
        "gpuprov_sandbox=true",
        f"gpuprov_mirror_url={ctx.mirror_url}",
        f"gpuprov_mirror_key_fingerprint={ctx.mirror_key_fingerprint}",
        "",
    ]
    return "\n".join(lines)


def render_known_hosts(entries: list[tuple[str, str]]) -> str:
    """known_hosts lines from (address, 'ssh-ed25519 AAAA...') pairs."""
    return "".join(f"{address} {key}\n" for address, key in entries)


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace path in one step so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
