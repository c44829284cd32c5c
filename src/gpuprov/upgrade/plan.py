"""The rollout's plan, pure: which hosts change, in which batches, and which stay as they are.

The canary (`--canary N`) is the first batch alone; the rest go in batches of `--max-unavailable`; the host
that runs slurmctld goes last, in a batch of its own (its slurmd and slurmctld restart; every other node is
then already on the new lock). A host whose verified versions already are the new lock's is left out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuprov import lock_changes
from gpuprov.errors import BadInput


@dataclass(frozen=True)
class Plan:
    batches: list[list[str]]
    unchanged: list[str]
    canary: bool  # the first batch is the canary
    changes: dict[str, lock_changes.HostChanges]


def batches(names: Sequence[str], canary: int, per_batch: int, last: str | None) -> list[list[str]]:
    """names in order: the canary first, then per_batch at a time; `last` (the controller) alone at the
    end."""
    order = [name for name in names if name != last]
    result: list[list[str]] = []
    if canary and order:
        result.append(order[:canary])
        order = order[canary:]
    result += [order[i : i + per_batch] for i in range(0, len(order), per_batch)]
    if last is not None and last in names:
        result.append([last])
    return result


def make(
    changes: Mapping[str, lock_changes.HostChanges],
    canary: int,
    per_batch: int,
    controller: str | None,
) -> Plan:
    moving = [name for name, change in changes.items() if change.parts]
    unchanged = [name for name, change in changes.items() if not change.parts]
    rest = [name for name in moving if name != controller]
    chosen = batches(moving, canary, per_batch, controller)
    return Plan(chosen, unchanged, canary > 0 and bool(rest), dict(changes))


def refuse_downgrades(changes: Mapping[str, lock_changes.HostChanges], allowed: bool) -> None:
    """BadInput, before any host is drained, when a part would go to an older version without
    --allow-downgrade."""
    if allowed:
        return
    found = [(name, part) for name, change in changes.items() for part in change.downgrades]
    if found:
        name, part = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise BadInput(
            f"{name}: {part.component} would go from {part.have} down to {part.want}{more}; a downgrade "
            "needs --allow-downgrade (check that the older release still fits your GPUs and jobs)"
        )


def lines(plan: Plan) -> list[list[str]]:
    """The plan as table rows: batch, host, what changes, reboot."""
    rows = []
    for number, batch in enumerate(plan.batches, start=1):
        label = "canary" if number == 1 and plan.canary else str(number)
        for name in batch:
            change = plan.changes[name]
            parts = ", ".join(f"{p.component} {p.have or '?'} -> {p.want}" for p in change.parts)
            rows.append([label, name, parts, "yes" if change.reboot else "no"])
    rows += [["-", name, "nothing (already at the new lock)", "no"] for name in plan.unchanged]
    return rows


def as_json(plan: Plan, controller: str | None) -> str:
    """The plan as one JSON line (the first line --json prints)."""
    return json.dumps(
        {
            "event": "plan",
            "batches": plan.batches,
            "canary": plan.canary,
            "controller": controller,
            "unchanged": plan.unchanged,
            "hosts": {name: change.as_dict() for name, change in plan.changes.items()},
        }
    )
