"""A run limited by --tags (an upgrade batch that applied the driver's role alone) records only the parts its
roles verified: the host's other parts come from the older whole run (gpuprov.ansible.recorded_versions)."""

from __future__ import annotations

import json
from pathlib import Path

from gpuprov.ansible import recorded_versions


def record(
    root: Path, run: str, inventory: Path, tags: list[str], versions: dict[str, dict[str, str]]
) -> None:
    (root / run).mkdir(parents=True)
    summary = {"verb": "upgrade" if tags else "bootstrap", "inventory_path": str(inventory.resolve()),
               "tags": tags, "versions": versions}  # fmt: skip
    (root / run / "summary.json").write_text(json.dumps(summary))


def test_a_tagged_runs_parts_over_the_older_whole_runs(tmp_path: Path) -> None:
    inventory, root = tmp_path / "inventory.ini", tmp_path / "runs"
    inventory.write_text("node1\n")
    record(root, "20261126-090000-000001", inventory, [], {"node1": {"driver": "550.1", "cuda": "11.8.0"}})
    record(
        root, "20261126-100000-000001", inventory, [], {"node1": {"driver": "580.126.09", "cuda": "12.4.1"}}
    )
    record(root, "20261126-110000-000001", inventory, ["nvidia_driver"], {"node1": {"driver": "590.48.01"}})
    found = recorded_versions.latest(inventory, ["node1"], root)["node1"]
    assert found.versions == {"driver": "590.48.01", "cuda": "12.4.1"}  # not 11.8.0: the whole run stops it
    assert found.run_id == "20261126-110000-000001" and found.verb == "upgrade"
