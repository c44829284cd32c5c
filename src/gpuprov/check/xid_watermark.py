"""Which Xid events a check has already judged, per host: a watermark kept in the state dir.

An Xid stays in the kernel log until reboot, also after the prescribed GPU reset (`nvidia-smi -r`); judged
every time, it would fail the host until a reboot. So each check records, per host, the boot (its
/proc/sys/kernel/random/boot_id) and the newest Xid's seconds since boot it saw; the next check judges only
events after that (Azure's node health check likewise reports an Xid once: azure_gpu_xid.nhc looks for it
in its own log first). What a GPU still has after an Xid (a pending row remap, a missing GPU, a slow matmul)
the state checks see on every run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gpuprov import console
from gpuprov.check import parsers, store

FILE = "xid-watermarks.json"
KEY = "xid_watermark"  # where a host's watermark goes in its gathered data, for the xid check


@dataclass(frozen=True)
class Watermark:
    boot_id: str
    seconds: float  # the newest Xid judged, in seconds since that boot
    checked_at: str  # when the check that judged it ran (ISO 8601, UTC)


def load() -> dict[str, Watermark]:
    """Every host's watermark; none where the file is missing or unreadable (all Xids are then new)."""
    try:
        data = json.loads((store.checks_dir() / FILE).read_text())
        return {str(host): Watermark(**mark) for host, mark in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def with_mark(data: Mapping[str, Any], mark: Watermark | None) -> dict[str, Any]:
    """The host's gathered data with its watermark added for the xid check."""
    return {**data, KEY: asdict(mark) if mark else None}


def is_new(event: parsers.XidEvent, boot_id: str, mark: Mapping[str, Any] | None) -> bool:
    """Whether an earlier check has not judged the event yet (an event without a time is always new)."""
    if not mark or not boot_id or mark.get("boot_id") != boot_id or event.seconds is None:
        return True
    return event.seconds > float(mark.get("seconds", 0.0))


def advanced(
    marks: Mapping[str, Watermark], gathered: Iterable[tuple[str, Mapping[str, Any]]], now: str
) -> dict[str, Watermark]:
    """The watermarks after this check: each host whose kernel log was read moves to its newest Xid."""
    result = dict(marks)
    for host, data in gathered:
        log = data.get("kernel_log")
        boot_id = str(data.get("boot_id") or "")
        if not isinstance(log, Mapping) or log.get("rc") != 0 or not boot_id:
            continue
        times = [e.seconds for e in parsers.xid_events(str(log.get("stdout", ""))) if e.seconds is not None]
        old = result.get(host)
        floor = old.seconds if old and old.boot_id == boot_id else 0.0
        result[host] = Watermark(boot_id, max([floor, *times]), now)
    return result


def save(marks: Mapping[str, Watermark]) -> None:
    """Written whole (a temporary file renamed); a failure warns: the next check judges those Xids again."""
    path = store.checks_dir() / FILE
    tmp = path.with_name(FILE + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({h: asdict(m) for h, m in sorted(marks.items())}, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        console.warning(
            f"the Xid watermark was not saved ({path}: {exc.strerror or exc}): the next check "
            "judges this check's Xid events again"
        )
