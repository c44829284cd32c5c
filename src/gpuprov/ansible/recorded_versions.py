"""The versions each host's roles last verified (`gpuprov_verified`), from the run records of an inventory.

Every playbook run keeps the versions its roles read back from the hosts in summary.json (`versions`, per
host). The newest run of the same inventory file that recorded a host gives that host's versions: what `lock
diff` and `upgrade` compare a new lock with (a run limited by --tags gives the parts it verified, older runs
the rest). A run that failed still counts for the hosts it verified (the roles publish only after their
verify step passed).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from gpuprov.ansible import runs


@dataclass(frozen=True)
class Recorded:
    versions: dict[str, str]
    run_id: str  # the run directory's name: when (it sorts by time) and where to look
    verb: str


def latest(inventory: Path, host_names: Collection[str], root: Path | None = None) -> dict[str, Recorded]:
    """Per host of host_names, the newest record of its verified versions in runs of this inventory file
    (matched by its absolute path); hosts no run recorded are absent."""
    root = root or runs.runs_dir()
    wanted = set(host_names)
    found: dict[str, Recorded] = {}
    if not root.is_dir():
        return found
    target = str(inventory.resolve())
    complete: set[str] = set()  # hosts with a record of a whole site.yml run: nothing older is needed
    for path in sorted((p for p in root.iterdir() if p.is_dir()), reverse=True):
        try:
            summary = json.loads((path / runs.SUMMARY).read_text())
        except (OSError, ValueError):
            continue  # a run still going, or a damaged record: the next older one
        if not isinstance(summary, dict) or summary.get("inventory_path") != target:
            continue
        # A run limited by --tags (an upgrade batch applies only the roles its lock change touches) verified
        # only its roles' parts: older runs fill in the rest, the newer value of a part wins.
        partial = bool(summary.get("tags"))
        versions = summary.get("versions")
        for host, recorded in (versions if isinstance(versions, dict) else {}).items():
            if host not in wanted or host in complete or not isinstance(recorded, dict):
                continue
            plain = {str(k): str(v) for k, v in recorded.items()}
            newer = found.get(host)
            found[host] = (
                Recorded({**plain, **newer.versions}, newer.run_id, newer.verb)
                if newer
                else Recorded(plain, path.name, str(summary.get(runs.VERB, "bootstrap")))
            )
            if not partial:
                complete.add(host)
        if wanted <= complete:
            break
    return found
