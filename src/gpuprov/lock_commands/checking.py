"""`gpuprov lock check LOCK [INVENTORY]`: what bootstrap's preflight checks of a lock, standalone.

Without an inventory: the table checks (gpuprov.lock: the driver, CUDA, cuDNN, NCCL and PyTorch rows, the
image, Horovod, the toolkit). With one: gpuprov.host_preflight on every host with this lock (SSH with host
key checking, sudo, Python, OS, NVIDIA's repository for the OS, the GPU generation), read-only. The result
is a table (or JSON with --json) and preflight's exit code: 0 fits, 2 the lock, 6 a host unreachable, 7 a
host that cannot take the lock.
"""

from __future__ import annotations

import json
from typing import Any

from gpuprov import console, gpu_generations, host_options, host_preflight, hosts, lock, lock_file
from gpuprov.errors import ExitCode
from gpuprov.lock_commands.command import LockCheckOptions

TABLE_ONLY = "no inventory given: only the table was checked; give INVENTORY to check each host's OS and GPUs"


def run(opts: LockCheckOptions) -> ExitCode:
    """Check the lock (and the inventory's hosts); show the result; return the exit code."""
    stack = lock_file.read(opts.lock)
    given = opts.inventory
    if given is None and not host_options.default_inventory_exists():
        return _table_only(stack, opts.json)
    inventory = hosts.load(host_options.inventory_path(given), opts.limit)
    if not opts.json:
        console.step(
            f"Checking the lock on {len(inventory.hosts)} host(s), read-only: SSH, sudo, Python, OS, "
            "NVIDIA's repository, GPU generation"
        )
    reports, lock_problems = host_preflight.run(inventory, {hosts.LOCK_VARIABLE: stack})
    code = host_preflight.exit_code(reports, lock_problems)
    if opts.json:
        console.result(json.dumps({**host_preflight.summary(reports, lock_problems), "exit_code": int(code)}))
        return code
    for report in reports:
        for warning in report.warnings:
            console.warning(f"{inventory.host(report.host).label}: {warning}")
    _show(reports, lock_problems, code)
    return code


def _table_only(stack: dict[str, Any], as_json: bool) -> ExitCode:
    try:
        messages = lock.check(stack)
    except (OSError, ValueError) as exc:
        messages = [f"the compatibility table cannot be read: {exc}"]
    code = ExitCode.BAD_INPUT if messages else ExitCode.OK
    if as_json:
        problems = [{"host": "(lock)", "check": "lock", "message": m} for m in messages]
        console.result(json.dumps({"hosts": {}, "lock_problems": problems, "exit_code": int(code)}))
        return code
    if messages:
        console.table(
            "Lock check: the lock does not fit", ["check", "result"], [["lock", m] for m in messages]
        )
    else:
        console.success("The lock fits gpuprov's compatibility table")
    console.notice(TABLE_ONLY)
    return code


def _show(
    reports: list[host_preflight.HostReport], lock_problems: list[host_preflight.Problem], code: int
) -> None:
    names = _gpu_names(reports)
    rows = []
    for report in reports:
        if not report.problems:
            rows.append(
                [report.host, "ok", "; ".join(filter(None, [report.os or "-", names.get(report.host)]))]
            )
        rows += [[report.host, p.check, p.message] for p in report.problems]
    rows += [[p.host, p.check, p.message] for p in lock_problems]
    title = (
        "Lock check: every host can take the lock" if code == ExitCode.OK else "Lock check: problems found"
    )
    console.table(title, ["host", "check", "result"], rows)
    if code == ExitCode.OK:
        console.success(f"The lock fits all {len(reports)} host(s); nothing was changed on any host")


def _gpu_names(reports: list[host_preflight.HostReport]) -> dict[str, str]:
    """Each host's GPUs as a short text ("8x H100 SXM5 80GB (Hopper, 10de:2330)"), where it has any."""
    if not any(r.gpus for r in reports):
        return {}
    try:
        tables = gpu_generations.load_tables()
    except (OSError, ValueError):
        return {}
    return {
        r.host: ", ".join(m.shown() for m in gpu_generations.models(r.gpus, tables))
        for r in reports
        if r.gpus
    }
