"""What the drift check remembers of each host after an ok bootstrap: one JSON file per host under the state
dir, `drift/<inventory key>/<host>.json`, private (0600).

A record holds the run's input fingerprint, the host's identity and every managed item's digest (sha256 of
a file, a package's version and hold state, a unit's state): never a file's content, a variable or a secret.
A record that cannot be read is no record (the host gets a full run); one that cannot be written costs
only the next run's speed, so neither stops a bootstrap.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprov import paths

FORMAT = 1
FOLDER = "drift"


@dataclass(frozen=True)
class Record:
    fingerprint: str
    identity: dict[str, Any]
    roles: dict[str, dict[str, str]]  # role -> item -> digest
    run_id: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "identity": self.identity,
            "roles": self.roles,
            "run_id": self.run_id,
        }


def folder(inventory: Path, root: Path | None = None) -> Path:
    """The records of one inventory file (by its absolute path)."""
    key = hashlib.sha256(str(inventory.resolve()).encode()).hexdigest()[:16]
    return (root or paths.state_dir()) / FOLDER / key


def _file(inventory: Path, host: str, root: Path | None) -> Path:
    return folder(inventory, root) / f"{hashlib.sha256(host.encode()).hexdigest()[:16]}.json"


def read(inventory: Path, host: str, root: Path | None = None) -> Record | None:
    """The host's record, or None when there is none or it cannot be read exactly."""
    try:
        data = json.loads(_file(inventory, host, root).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    roles = data.get("roles")
    if not isinstance(roles, dict) or not all(
        isinstance(items, dict) and all(isinstance(v, str) for v in items.values())
        for items in roles.values()
    ):
        return None
    if not isinstance(data.get("fingerprint"), str) or not isinstance(data.get("identity"), dict):
        return None
    return Record(data["fingerprint"], data["identity"], roles, str(data.get("run_id", "")))


def write(inventory: Path, host: str, record: Record, root: Path | None = None) -> str | None:
    """Store the host's record (atomically); returns why it could not be written, else None."""
    target = _file(inventory, host, root)
    try:
        paths.write_private_json(target, {**record.as_dict(), "host": host}, sort_keys=True)
    except OSError as exc:
        return f"{target}: {exc.strerror or exc}"
    return None


def forget(inventory: Path, host: str, root: Path | None = None) -> None:
    """Drop the host's record (a run that failed there: the next one runs everything)."""
    with contextlib.suppress(OSError):
        _file(inventory, host, root).unlink()
