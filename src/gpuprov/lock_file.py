"""A lock file (`gpuprov lock check`, `lock diff`, `upgrade`): a YAML file holding `gpu_stack:` (as the
inventory's group_vars/all/gpu_stack.yml and `-e @lock.yml` do), or the lock's fields alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuprov import hosts, yaml_limits
from gpuprov.errors import BadInput

WHAT = (
    f"a YAML file with a '{hosts.LOCK_VARIABLE}:' mapping, as inventory/sample/group_vars/all/gpu_stack.yml"
)


def read(path: Path) -> dict[str, Any]:
    """The lock's mapping; BadInput (one line) when the file is missing, unreadable or not a lock."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"lock file {path} does not exist; give {WHAT}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"lock file {path} cannot be read ({type(exc).__name__}); give {WHAT}") from None
    try:
        kind = yaml_limits.check_text(text)
    except yaml_limits.TooLarge as exc:
        raise BadInput(f"lock file {path} is refused: {exc}; give {WHAT}") from None
    try:
        data = yaml.safe_load(text) if kind == "mapping" else None
    except yaml.YAMLError:
        data = None
    if not isinstance(data, dict):
        raise BadInput(f"lock file {path} is not a YAML mapping; give {WHAT}")
    stack = data.get(hosts.LOCK_VARIABLE, data)
    if not isinstance(stack, dict):
        raise BadInput(f"lock file {path}: {hosts.LOCK_VARIABLE} is not a mapping; give {WHAT}")
    return stack
