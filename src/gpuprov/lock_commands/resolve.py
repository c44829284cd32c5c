"""`gpuprov lock resolve [--driver-branch B] [--cuda X.Y] [--torch X.Y] [INVENTORY]`: write the newest lock.

The constraints are checked against the table and FILE against overwriting before any host is contacted
(exit 2). Then metadata.gather reads each OS's repository and the PyTorch index through the hosts,
resolving.resolve picks the lock, and the lock is checked as bootstrap's preflight will check it (the table,
each host's OS repository in the table, each host's GPUs) before it is written, atomically, with each
choice's reason.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuprov import console, gpu_generations, host_preflight, hosts, lock
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.lock_commands import metadata, resolving
from gpuprov.lock_commands.command import LockResolveOptions

COMMENT_WIDTH = 110


def run(opts: LockResolveOptions, today: datetime.date | None = None) -> ExitCode:
    day = today or datetime.date.today()
    table = lock.load_table()
    check_constraints(opts, table)
    refuse_overwrite(opts.output, opts.force)
    inventory = hosts.load(opts.inventory, opts.limit)
    console.step(
        f"Reading NVIDIA's repository for each OS and the PyTorch index through {len(inventory.hosts)} "
        "host(s), read-only"
    )
    gathered = metadata.gather(inventory)
    if gathered.problems:
        return _show_problems(gathered.problems)
    wanted = resolving.Wanted(
        opts.driver_branch, opts.cuda, opts.torch, opts.driver_flavor, metadata.allow_cpu(inventory)
    )
    wheels = resolving.Wheels(frozenset(gathered.torch), gathered.torch_where)
    try:
        found = resolving.resolve(table, wanted, gathered.offers, wheels, day)
    except resolving.Unmet as unmet:
        return _show_problems(_unmet_lines(unmet, gathered))
    _confirm(found.lock, gathered, table)
    gpu_lines = _gpu_problems(found.lock, gathered, table)
    if gpu_lines:
        return _show_problems(gpu_lines)
    warnings = lock.warnings(found.lock, table, day)
    behind = resolving.unlisted(table, gathered.offers)
    write(opts.output, render(found, opts, sorted(gathered.offers), warnings, behind), opts.force)
    _show(found, opts.output, warnings, behind)
    return ExitCode.OK


def check_constraints(opts: LockResolveOptions, table: Mapping[str, Any]) -> None:
    """BadInput when the table itself has nothing of a constraint (no host need be asked)."""
    given: list[tuple[str, str | None, str, Callable[[str], str]]] = [
        ("--driver-branch", opts.driver_branch, "drivers", _branch),
        ("--cuda", opts.cuda, "cuda", _minor),
        ("--torch", opts.torch, "pytorch", _minor),
    ]
    for option, value, kind, part in given:
        listed = [str(r["version"]) for r in table.get(kind, []) if isinstance(r, Mapping)]
        if value is not None and value not in {part(v) for v in listed}:
            names = sorted({part(v) for v in listed}, key=resolving.key)
            raise BadInput(
                f"{option} {value}: gpuprov's compatibility table has no such release (it has "
                f"{', '.join(names)}); {lock.HOW_TO_ADD}"
            )


def refuse_overwrite(path: Path, force: bool) -> None:
    if path.is_dir():
        raise BadInput(f"--output {path} is a directory; give the path of the lock file to write")
    if path.exists() and not force:
        raise BadInput(f"{path} exists; give another --output, or --force to replace it")
    if not path.parent.is_dir():
        raise BadInput(f"--output {path}: the directory {path.parent} does not exist")


def _unmet_lines(unmet: resolving.Unmet, gathered: metadata.Gathered) -> list[host_preflight.Problem]:
    """One line per host: its repository's blocker, else the one of the combination or the index."""
    shared = [b.reason for b in unmet.blockers if b.repository is None]
    lines = []
    for host_os in gathered.hosts:
        own = [b.reason for b in unmet.blockers if b.repository == host_os.repository]
        reason = "; ".join(own or shared) or "; ".join(b.reason for b in unmet.blockers)
        lines.append(
            host_preflight.Problem(
                host_os.host.name, "lock", f"{host_os.shown} ({host_os.repository}): no lock fits: {reason}"
            )
        )
    return lines


def _confirm(stack: Mapping[str, str], gathered: metadata.Gathered, table: Mapping[str, Any]) -> None:
    """The lock passes what bootstrap's preflight checks of it (the table, each host's OS repository)."""
    problems = lock.check(stack, table)
    for host_os in gathered.hosts:
        os_id, version = _os_of(host_os.repository)
        problems += lock.os_problems(stack, os_id, version, table)
    if problems:  # resolving and lock.check disagree: a defect here, not the user's input
        raise GpuprovError(
            f"the resolved lock fails gpuprov's own lock check: {problems[0]}; please report it"
        )


def _gpu_problems(
    stack: Mapping[str, str], gathered: metadata.Gathered, table: Mapping[str, Any]
) -> list[host_preflight.Problem]:
    """A line per host whose GPUs cannot run the lock (as bootstrap's preflight would refuse it): nothing is
    written, and the line says which field to constrain (--cuda, --driver-flavor, ...)."""
    if not any(h.gpus for h in gathered.hosts):
        return []
    tables = gpu_generations.load_tables()
    cudas = [str(row["version"]) for row in table.get("cuda", [])]
    lines = []
    for host_os in gathered.hosts:
        line, _ = (
            gpu_generations.host_problems(host_os.gpus, stack, tables, cudas) if host_os.gpus else (None, [])
        )
        if line:
            lines.append(
                host_preflight.Problem(host_os.host.name, "gpu", f"the newest lock does not fit: {line}")
            )
    return lines


def _os_of(repository: str) -> tuple[str, str]:
    """ "ubuntu2204" -> ("ubuntu", "22.04"), "rhel9" -> ("rhel", "9"): what lock.repository_for reverses."""
    family = repository.rstrip("0123456789")
    digits = repository[len(family) :]
    return family, (f"{digits[:2]}.{digits[2:]}" if family == "ubuntu" else digits)


def render(
    found: resolving.Resolution,
    opts: LockResolveOptions,
    repositories: list[str],
    warnings: list[str],
    behind: Sequence[str] = (),
) -> str:
    constraints = " ".join(
        f"{name} {value}"
        for name, value in (
            ("--driver-branch", opts.driver_branch),
            ("--cuda", opts.cuda),
            ("--torch", opts.torch),
            ("--driver-flavor", opts.driver_flavor),
        )
        if value is not None
    )
    head = [
        f"Written by `gpuprov lock resolve {constraints}` on {datetime.date.today().isoformat()} from the "
        f"metadata of the repositories {', '.join(repositories)} and the PyTorch index, read through the "
        f"hosts of {opts.inventory}.",
        f"Use it with `gpuprov bootstrap -e @{opts.output.name}`, or as group_vars/all/gpu_stack.yml.",
        *(f"Passed over: {line}" for line in found.passed_over),
        *(f"Warning: {line}" for line in warnings),
        *(f"Not in the table yet ({lock.HOW_TO_ADD}): {line}" for line in behind),
    ]
    lines = [*_comment(head, ""), f"{hosts.LOCK_VARIABLE}:"]
    for name, value in found.lock.items():
        lines += _comment([found.reasons[name]], "  ")
        lines.append(f"  {name}: {json.dumps(value)}")  # quoted, as the lock wants versions
    return "\n".join(lines) + "\n"


def _comment(paragraphs: list[str], indent: str) -> list[str]:
    lines = []
    for text in paragraphs:
        lines += textwrap.wrap(
            text, COMMENT_WIDTH, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}#   "
        )
    return lines


def write(path: Path, text: str, force: bool) -> None:
    """Written whole or not at all: a temporary file beside it, then renamed (--force) or hard-linked into
    place (no --force: the link fails if someone made the file meanwhile, so nothing is overwritten)."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if force:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    except FileExistsError:
        raise BadInput(f"{path} exists; give another --output, or --force to replace it") from None
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _show_problems(problems: list[host_preflight.Problem]) -> ExitCode:
    console.table(
        "Lock resolve: no lock written",
        ["host", "check", "result"],
        [[p.host, p.check, p.message] for p in problems],
    )
    return (
        ExitCode.HOSTS_UNREACHABLE if any(p.check == "ssh" for p in problems) else ExitCode.PREFLIGHT_FAILED
    )


def _show(found: resolving.Resolution, path: Path, warnings: list[str], behind: list[str]) -> None:
    rows = [[name, value, found.reasons[name]] for name, value in found.lock.items()]
    console.table("Lock resolve: the newest lock that fits", ["field", "value", "why"], rows)
    for line in found.passed_over:
        console.info(f"passed over: {line}")
    for line in warnings:
        console.warning(line)
    for line in behind:
        console.notice(f"not in the table yet: {line} ({lock.HOW_TO_ADD})")
    console.success(f"Wrote {path}; nothing was changed on any host")


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _branch(version: str) -> str:
    return version.split(".")[0]
