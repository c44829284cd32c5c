"""What `gpuprov sandbox up` may be asked for (a name, a node count, an OS list), checked before anything
starts. Light on purpose: the CLI reads it for its help and its input errors without loading the cluster
code (paramiko, the mirror, the stand-ins)."""

from __future__ import annotations

import re

from gpuprov.errors import BadInput
from gpuprov.sandbox.images import SANDBOX_OSES

MAX_NODES = 16
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,30}$")


def validate_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise BadInput(
            f"sandbox name {name!r} is not valid: use 1-31 lower-case letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )


def parse_os_list(text: str) -> list[str]:
    """'debian12,rocky9' -> ['debian12', 'rocky9'], each checked against the supported list."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise BadInput(f"--os is empty; choose from {', '.join(SANDBOX_OSES)}")
    for os_name in names:
        if os_name not in SANDBOX_OSES:
            raise BadInput(
                f"--os {os_name!r} is not supported; choose from {', '.join(SANDBOX_OSES)} "
                "(a comma-separated list mixes them)"
            )
    return names


def validate_node_count(nodes: int) -> None:
    if not 1 <= nodes <= MAX_NODES:
        raise BadInput(f"--nodes {nodes} is out of range; a sandbox has 1 to {MAX_NODES} nodes")
