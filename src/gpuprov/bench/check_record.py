"""The collective bus bandwidth `gpuprov check` last measured on the hosts a bench ran on, kept beside the
bench's result: a slow interconnect is the first suspect for a poor cross-node factor. Read from check's
stored runs (check/store.py); nothing is measured here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuprov.check import store

# Check's all-hosts bandwidth result is named "all N hosts" (check/bandwidth.py); pair results are "a <-> b".
_ALL_HOSTS = "all "
_MEASURED = ("pass", "fail")  # the statuses of a bandwidth result that carries a measured figure


def find(inventory: Path, hosts: Sequence[str]) -> dict[str, Any] | None:
    """The newest check run on exactly these hosts of this inventory that measured the all-hosts busbw."""
    root = store.checks_dir()
    if not root.is_dir():
        return None
    wanted = sorted(hosts)
    inventory = inventory.resolve()
    for run in _newest_first(root):
        record = _load(run / store.RESULTS)
        if record is None or not isinstance(record.get("hosts"), list):
            continue
        if Path(str(record.get("inventory", ""))).resolve() != inventory or sorted(record["hosts"]) != wanted:
            continue
        found = _busbw(record)
        if found is not None:
            return {
                "check_run": run.name,
                "started_at": record.get("started_at"),
                "finished_at": record.get("finished_at"),  # absent in records made before it was kept
                "hosts": record["hosts"],
                **found,
            }
    return None


def _newest_first(root: Path) -> list[Path]:
    """The check runs, newest first by when results.json was written (run ids of one second do not sort)."""
    written = []
    for run in root.iterdir():
        try:
            written.append(((run / store.RESULTS).stat().st_mtime_ns, run))
        except OSError:  # not a run, or one still being written
            continue
    return [run for _, run in sorted(written, reverse=True)]


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # a run still being written, or damaged: not one to quote
        return None
    return data if isinstance(data, dict) else None


def _busbw(record: dict[str, Any]) -> dict[str, Any] | None:
    for result in record.get("results", []):
        if not isinstance(result, dict) or result.get("check") != "bandwidth":
            continue
        if not str(result.get("host", "")).startswith(_ALL_HOSTS) or result.get("status") not in _MEASURED:
            continue
        measured = str(result.get("measured", ""))
        try:  # "12.345 (spread 3%)"
            median = float(measured.split()[0])
        except (IndexError, ValueError):
            continue
        return {
            "busbw_gbps": median,
            "measured": measured,
            "status": result["status"],
            "detail": result.get("detail", ""),
        }
    return None


def line(record: dict[str, Any] | None) -> str:
    """One line for the report under the table."""
    if record is None:
        return "collective busbw: no `gpuprov check` bandwidth result on these hosts (run `gpuprov check`)"
    when = record.get("finished_at") or f"run {record['check_run']}"
    return (
        f"collective busbw (gpuprov check, finished {when}): {record['measured']} GB/s, "
        f"{record['status']}; {record['detail']}"
    )
