"""The time a rollout's batches will take, from the records of earlier rollouts of the same inventory.

Every host that finishes (gate passed, back in service) leaves a line in the rollout dir's history.jsonl:
how long each of its phases took (out of service and its jobs' wait, the apply with or without a reboot,
the gate, full or quick). A batch's hosts run their phases at once, so a batch takes as long as its slowest
host: each host's phases are estimated from its own earlier records, else every host's (the median, which
one odd run does not move), else a stated guess (GUESS_S: no record yet). Once this rollout has finished a
batch, its own batches' mean time takes over (progress.Reporter).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuprov.ansible import runs
from gpuprov.upgrade import state

HISTORY = "history.jsonl"
KEEP = 500  # records read back: the newest; older rollouts say little about today's cluster
# With no record at all: a driver's apply with a reboot (packages, DKMS or a prebuilt module, the reboot
# and the driver back) is taken as 15 min, the --reboot-timeout default; without a reboot 5 min; a
# drain of an idle host 1 min; the full gate (probes, matmul, ports, the all-reduce) 5 min, quick 1 min.
GUESS_S = {"draining": 60.0, "applying+reboot": 900.0, "applying": 300.0, "gating:full": 300.0,
           "gating:quick": 60.0}  # fmt: skip

Records = Sequence[Mapping[str, Any]]  # history lines, as load() returns them


def _key(phase: str, reboot: bool, gate: str) -> str:
    if phase == state.APPLYING:
        return "applying+reboot" if reboot else "applying"
    if phase == state.GATING:
        return f"gating:{gate}"
    return phase


def host_record(host: str, entry: Mapping[str, Any], gate: str, finished: float) -> dict[str, Any] | None:
    """The history line of a host that has just finished: each phase's seconds (None: a phase not seen in
    this process, e.g. done before a resume)."""
    started = entry.get("started") or {}
    order = [state.DRAINING, state.APPLYING, state.GATING]
    if any(phase not in started for phase in order):
        return None
    ends = [started[state.APPLYING], started[state.GATING], finished]
    reboot = bool((entry.get("changes") or {}).get("reboot"))
    phases = {_key(p, reboot, gate): round(end - started[p], 1) for p, end in zip(order, ends, strict=True)}
    return {"host": host, "time": round(finished), "phases": phases}


def append(directory: Path, record: dict[str, Any] | None) -> None:
    """Add a finished host's record; a history that cannot be written costs only the estimate."""
    if record is None:
        return
    try:
        with runs.private_files(), (directory / HISTORY).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
    except OSError:
        return


def load(directory: Path) -> list[dict[str, Any]]:
    try:
        lines = (directory / HISTORY).read_text(encoding="utf-8").splitlines()[-KEEP:]
    except OSError:
        return []
    records = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash mid-write
        if isinstance(record, dict) and isinstance(record.get("phases"), dict):
            records.append(record)
    return records


def _phase_s(history: Records, host: str, key: str) -> tuple[float, bool]:
    """(seconds, from records): the host's own median, else every host's, else the guess."""
    for chosen in ([r for r in history if r.get("host") == host], history):
        values = [float(v) for r in chosen if isinstance(v := r["phases"].get(key), int | float)]
        if values:
            return statistics.median(values), True
    return GUESS_S[key], False


def batches(
    plan: Sequence[Sequence[str]], hosts: Mapping[str, Mapping[str, Any]], history: Records, gate: str
) -> tuple[list[float], str]:
    """Each batch's estimated seconds and what they rest on (said beside the time left)."""
    found: list[float] = []
    recorded = guessed = 0
    for batch in plan:
        longest = 0.0
        for host in batch:
            reboot = bool((hosts.get(host, {}).get("changes") or {}).get("reboot"))
            total = 0.0
            for phase in (state.DRAINING, state.APPLYING, state.GATING):
                seconds, known = _phase_s(history, host, _key(phase, reboot, gate))
                total += seconds
                recorded, guessed = recorded + known, guessed + (not known)
            longest = max(longest, total)
        found.append(longest)
    if not guessed:
        return found, f"from {len(history)} host record(s) of earlier rollouts"
    if not recorded:
        return found, "a guess: no earlier rollout of this inventory is recorded"
    return found, f"partly from {len(history)} host record(s) of earlier rollouts, partly a guess"
