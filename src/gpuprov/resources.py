"""Find the roles, playbooks and templates that ship with gpuprov.

In a source checkout they are read from the repository (so edits take effect at once); in an installed
wheel they live in the package under _data/.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_KINDS = ("roles", "playbooks", "templates", "inventory")


def _checkout_root() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "roles").is_dir():
        return root
    return None


def data_dir(kind: str) -> Path:
    if kind not in _KINDS:
        raise ValueError(f"unknown resource kind {kind!r}")
    root = _checkout_root()
    if root is not None:
        return root / kind
    return Path(str(resources.files("gpuprov") / "_data" / kind))
