"""Recorded bootstrap runs (tests/recorded/bootstrap-runs/): what runner's events of a real run were, reduced
to what the progress and the estimate read, and fed back through the Tracker as they came.

Made with `python -m tests.unit.ansible.recorded_runs <run dir> <out.jsonl.gz>` (see that folder's README).
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).parents[2] / "recorded" / "bootstrap-runs"
KEPT = ("host", "role", "task", "play", "duration")


def reduce(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The events of a run directory (job_events/<counter>-<uuid>.json) in order, each cut to its kind, its
    time, the fields of KEPT and whether a result changed something (not the results: they hold host
    details)."""
    files = sorted((run_dir / "job_events").glob("*.json"), key=lambda p: int(p.name.split("-", 1)[0]))
    for path in files:
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        kept = {key: data[key] for key in KEPT if data.get(key) is not None}
        if event["event"] != "playbook_on_play_start":
            kept.pop("play", None)  # the play's name once, at its start
        if (data.get("res") or {}).get("changed"):
            kept["res"] = {"changed": True}  # of the result, only whether it changed something
        yield {"event": event["event"], "created": event["created"], "event_data": kept}


def load(name: str) -> list[dict[str, Any]]:
    with gzip.open(RECORDED / name, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    with gzip.open(target, "wt") as out:
        for event in reduce(source):
            out.write(json.dumps(event, sort_keys=True) + "\n")
