"""`gpuprov lock diff OLD NEW [INVENTORY]`: what moving from lock OLD to lock NEW changes.

The fields that differ (a downgrade marked), then with an inventory, per host: each part whose version the
host's roles last verified (the run records' `gpuprov_verified`; the OLD lock's value where no run recorded
the host) is not NEW's, the roles that would run, whether the host reboots, and what a job running there
would meet. Read-only: no host is contacted.
"""

from __future__ import annotations

import json
from typing import Any

from gpuprov import console, host_options, hosts, lock, lock_changes, lock_file
from gpuprov.ansible import recorded_versions
from gpuprov.errors import BadInput, ExitCode
from gpuprov.lock_commands.command import LockDiffOptions


def run(opts: LockDiffOptions) -> ExitCode:
    old, new = lock_file.read(opts.old), lock_file.read(opts.new)
    problems = lock.check(new)
    if problems:
        raise BadInput(f"NEW lock {opts.new} does not fit: {problems[0]}; `gpuprov lock check` lists all")
    fields = lock_changes.field_changes(old, new)
    per_host: list[tuple[lock_changes.HostChanges, str]] = []
    if opts.inventory is not None or host_options.default_inventory_exists():
        inventory = hosts.load(host_options.inventory_path(opts.inventory), opts.limit)
        records = recorded_versions.latest(inventory.path, inventory.names)
        for name in inventory.names:
            record = records.get(name)
            changes = lock_changes.host_changes(name, old, new, record.versions if record else None)
            per_host.append((changes, f"run {record.run_id}" if record else "no run recorded"))
    if opts.json:
        console.result(json.dumps(as_dict(fields, per_host), indent=2))
    else:
        show(fields, per_host)
    return ExitCode.OK


def as_dict(
    fields: list[lock_changes.FieldChange], per_host: list[tuple[lock_changes.HostChanges, str]]
) -> dict[str, Any]:
    return {
        "fields": [{"field": f.field, "old": f.old, "new": f.new, "downgrade": f.downgrade} for f in fields],
        "hosts": {c.host: {**c.as_dict(), "record": where} for c, where in per_host},
    }


def show(
    fields: list[lock_changes.FieldChange], per_host: list[tuple[lock_changes.HostChanges, str]]
) -> None:
    rows = [[f.field, f.old or "-", f.new or "-", "downgrade" if f.downgrade else ""] for f in fields]
    if rows:
        console.table("Lock fields that change", ["field", "old", "new", ""], rows)
    else:
        console.info("The two locks pin the same versions.")
    if not per_host:
        console.info("No inventory given: give INVENTORY to see what changes on each host.")
        return
    host_rows = []
    for changes, where in per_host:
        parts = ", ".join(
            f"{p.component} {p.have or '?'} -> {p.want}{' (downgrade)' if p.downgrade else ''}"
            for p in changes.parts
        )
        host_rows.append(
            [
                changes.host,
                parts or "nothing (already at NEW)",
                ", ".join(changes.roles) or "-",
                "yes" if changes.reboot else "no",
                "; ".join(changes.jobs) or "-",
                where,
            ]
        )
    console.table(
        "Per host (versions its roles last verified)",
        ["host", "changes", "roles", "reboot", "running jobs", "from"],
        host_rows,
    )
