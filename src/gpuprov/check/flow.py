"""`gpuprov check` from its options to the results: input checked (exit 2 before any host is contacted),
every host probed at once, the per-host and cross-host checks, the table, the results kept, the exit code.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Sequence
from typing import Any

from gpuprov import console, hosts, lock
from gpuprov.check import (
    bandwidth,
    cross_checks,
    expected,
    figures,
    gather,
    host_checks,
    host_view,
    output,
    ports,
    store,
    variables,
    xid_watermark,
)
from gpuprov.check.options import CheckOptions
from gpuprov.check.results import Result, Status, counts, exit_code
from gpuprov.errors import BadInput, ExitCode


def _hosts(opts: CheckOptions) -> list[hosts.Host]:
    inventory = hosts.load(opts.inventory, opts.limit)
    for host in inventory.hosts:
        variables.check_inventory(host.name, host.vars, opts.extra_vars)
    selected = [dataclasses.replace(h, vars={**h.vars, **opts.extra_vars}) for h in inventory.hosts]
    hosts.check_ssh_files(selected, where="", fix="fix the path in the inventory")
    for host in selected:
        stack = host.vars.get(hosts.LOCK_VARIABLE)
        if stack is None:
            raise BadInput(
                f"{opts.inventory}: host {host.name} has no gpu_stack (the compatibility lock); "
                "set it in group_vars or pass -e @lock.yml"
            )
        problems = lock.check(stack)
        if problems:
            raise BadInput(f"host {host.name}: the lock does not fit: {problems[0]}")
    return selected


def run(opts: CheckOptions) -> ExitCode:
    return ExitCode(summarised(opts)["exit_code"])


def summarised(opts: CheckOptions) -> dict[str, Any]:
    """The run (as `run`), returning its summary: every result, the exit code (what gpuprov.check.api
    reads)."""
    started = time.monotonic()
    started_at = _now()
    selected = _hosts(opts)  # every input problem is found here, before any host is contacted
    store.check_room()  # and a state dir that cannot take the results
    keys = sorted({k for h in selected for k in expected.sysctls(h.vars)})
    console.step(f"Checking {len(selected)} host(s){' (quick)' if opts.quick else ''}")
    found = gather.gather(selected, keys)
    try:
        results = _results(opts, found, len(selected))
    finally:
        for item in found:
            if item.client is not None:
                item.client.close()
    code = exit_code(results)
    summary = {
        "inventory": str(opts.inventory.resolve()),  # absolute: bench matches its runs to it
        "hosts": [h.name for h in selected],
        "quick": opts.quick,
        "started_at": started_at,
        "finished_at": _now(),  # bench shows it beside the busbw it reads from here (bench/check_record.py)
        "seconds": round(time.monotonic() - started, 2),
        "counts": counts(results),
        "exit_code": int(code),
        "results": [r.as_dict() for r in results],
        "figures": figures.as_dicts(results),  # what the table at the end shows
    }
    where = store.save(summary)
    if opts.json:
        output.as_json(summary)
    output.show(results, verbose=opts.verbose)
    if where is not None:
        console.info(f"Results: {where / store.RESULTS} ({summary['seconds']} s)")
    return summary


def _results(opts: CheckOptions, found: list[gather.Gathered], selected: int) -> list[Result]:
    """The wanted checks: per host, then across the hosts (versions, ports, bandwidth)."""
    results: list[Result] = []
    marks = xid_watermark.load()
    for item in found:
        failed = _ssh_failure(item)
        if failed is not None:
            results.append(failed)
            continue
        data = xid_watermark.with_mark(item.data, marks.get(item.host.name))
        view = host_view.HostView(item.host.name, item.host.vars, data)
        for name, check in host_checks.CHECKS.items():
            names = (name, "python") if name == "torch" else (name,)
            if any(opts.wanted(n) for n in names):
                results += [r for r in check(view) if opts.wanted(r.check)]
    if opts.wanted("xid"):  # the next check judges only Xids after these
        xid_watermark.save(xid_watermark.advanced(marks, [(g.host.name, g.data) for g in found], _now()))
    if opts.wanted("versions-agree"):
        results += cross_checks.versions_agree(results, selected)
    if opts.wanted("ports"):
        console.step("Testing the rendezvous and NCCL/gloo ports between the hosts")
        results += ports.check(found)
    if opts.wanted("bandwidth"):
        console.step("Measuring all-reduce bus bandwidth across the hosts (gpuprov launch)")
        found_ok = [g for g in found if g.error is None]
        results += bandwidth.check(opts.inventory, found_ok, opts.extra_vars, opts.image)
    return results


def _ssh_failure(item: gather.Gathered) -> Result | None:
    """The host's one result when it could not be probed, else None."""
    if item.error is None:
        return None
    if item.unreachable:
        return Result(
            "ssh",
            item.host.name,
            Status.FAIL,
            detail=item.error,
            action="bring the host back or fix its SSH settings, then check again",
        )
    # The host answers, gpuprov's program on it did not.
    return Result(
        "ssh",
        item.host.name,
        Status.COULD_NOT_RUN,
        detail=item.error,
        action=f"check that {gather.system_python(item.host)} (Python 3.8+) runs on the host",
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def names_help(names: Sequence[str]) -> str:
    return ", ".join(names)
