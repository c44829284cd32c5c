"""The `gpuprov lock` commands: `lock check`'s and `lock resolve`'s options (each written once); the work is
in checking.py and resolve.py, imported only once the options are good."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import click

from gpuprov import cli_options, host_options
from gpuprov.errors import BadInput, ExitCode, Finished


def _lock_path(given: str) -> Path:
    if not given.strip():
        raise BadInput("the lock file path is empty; give a YAML file with a 'gpu_stack:' mapping")
    return Path(given).expanduser()


_Found = TypeVar("_Found", "LockCheckOptions", "LockDiffOptions")


def _finish(opts: _Found) -> _Found:
    if opts.limit is not None and opts.inventory is None and not host_options.default_inventory_exists():
        raise BadInput("--limit needs an inventory: give INVENTORY (or -i INVENTORY) with it")
    return opts


@dataclass(frozen=True)
class LockCheckOptions:
    lock: Path = cli_options.argument(metavar="LOCK", parse=_lock_path)
    inventory: Path | None = host_options.inventory()  # none, and no default: the table checks alone
    limit: str | None = host_options.limit()
    json: bool = host_options.json_flag("Print the result as JSON on stdout.")


LOCK_CHECK = cli_options.OptionSet(LockCheckOptions, finish=_finish)


@dataclass(frozen=True)
class LockDiffOptions:
    old: Path = cli_options.argument(metavar="OLD", parse=_lock_path)
    new: Path = cli_options.argument(metavar="NEW", parse=_lock_path)
    inventory: Path | None = host_options.inventory()  # none, and no default: the fields alone
    limit: str | None = host_options.limit()
    json: bool = host_options.json_flag("Print the changes as JSON on stdout.")


LOCK_DIFF = cli_options.OptionSet(LockDiffOptions, finish=_finish)


def _constraint(option: str, metavar: str, what: str, regex: str, example: str) -> str | None:
    """--cuda X.Y and its kind: only releases of what, given as regex (example in the help and errors)."""
    words = {"B": "a driver branch", "X.Y": f"a {what.split()[0]} minor"}[metavar]

    def check(given: str) -> str:
        if not re.fullmatch(regex, given.strip()):
            raise cli_options.Invalid(f'give {words} such as "{example}"')
        return given.strip()

    return cli_options.option(
        option,
        default=None,
        metavar=metavar,
        help=f"Only {what} (e.g. {example}).",
        parse=cli_options.optional(check),
    )


def _output(given: str) -> Path:
    if not given.strip():
        raise BadInput("--output is empty; give the path of the lock file to write (e.g. gpu_stack.yml)")
    return Path(given).expanduser()


@dataclass(frozen=True)
class LockResolveOptions:
    inventory: Path = host_options.inventory_found()  # the repositories are read through the hosts
    limit: str | None = host_options.limit()
    driver_branch: str | None = _constraint("--driver-branch", "B", "drivers of this branch", r"\d{3}", "580")
    cuda: str | None = _constraint("--cuda", "X.Y", "CUDA releases of this minor", r"\d+\.\d+", "12.8")
    torch: str | None = _constraint("--torch", "X.Y", "PyTorch releases of this minor", r"\d+\.\d+", "2.9")
    driver_flavor: str = cli_options.option(
        "--driver-flavor",
        default="open",
        metavar="open|proprietary",
        show_default=True,
        help="The kernel modules: open (Turing and newer) or proprietary.",
        parse=cli_options.one_of(("open", "proprietary")),
    )
    output: Path = cli_options.option(
        "-o",
        "--output",
        default="gpu_stack.yml",
        show_default=True,
        metavar="FILE",
        help="The lock file to write.",
        parse=_output,
    )
    force: bool = cli_options.flag("--force", help="Replace FILE if it exists.")


LOCK_RESOLVE = cli_options.OptionSet(LockResolveOptions)


@click.group("lock")
def lock() -> None:
    """The compatibility lock (gpu_stack) on its own, without changing any host."""


@lock.command("check")
@LOCK_CHECK
def check(opts: LockCheckOptions) -> None:
    """Check the lock in LOCK as bootstrap's preflight does, changing nothing on any host.

    LOCK is a YAML file with a gpu_stack: mapping (as group_vars/all/gpu_stack.yml). It is checked against
    gpuprov's compatibility table; with an inventory (INVENTORY or -i INVENTORY, else $GPUPROV_INVENTORY or
    ./inventory.ini where one exists) every host is checked too, read-only: SSH, sudo, Python, OS, NVIDIA's
    repository for the OS, and the GPU generation against the lock. Exit 0: it fits; 2: the lock does not
    fit the table (or bad input); 6: a host unreachable; 7: a host cannot take the lock.
    """
    from gpuprov.lock_commands import checking  # SSH: only once the options are good

    code = checking.run(opts)
    if code != ExitCode.OK:
        raise Finished(code)  # the results are shown; main() gives the exit code


@lock.command("resolve")
@LOCK_RESOLVE
def resolve(opts: LockResolveOptions) -> None:
    """Write the newest lock that fits gpuprov's table and what the hosts' repositories really carry.

    One host of each OS in INVENTORY (or -i INVENTORY, else $GPUPROV_INVENTORY or ./inventory.ini) reads
    NVIDIA's repository for its OS (apt Packages or dnf repodata; nvidia_repository_base_url where the
    inventory sets it) and the PyTorch index, read-only, over SSH with host key checking. The lock goes to
    FILE with each choice's reason; an existing FILE is kept unless --force. Exit 0: written; 2: bad input
    (FILE exists, a constraint the table cannot meet); 6: a host unreachable; 7: no lock fits a host's
    repository or its GPUs (one line per host), or its metadata cannot be read.
    """
    from gpuprov.lock_commands import resolve as resolving_command  # SSH: only once the options are good

    code = resolving_command.run(opts)
    if code != ExitCode.OK:
        raise Finished(code)


@lock.command("diff")
@LOCK_DIFF
def diff(opts: LockDiffOptions) -> None:
    """Show what moving from lock OLD to lock NEW changes, per field and per host.

    With an inventory (INVENTORY or -i INVENTORY, else $GPUPROV_INVENTORY or ./inventory.ini where one
    exists), each host's parts are compared with the versions its roles last verified (the run records of
    that inventory; the OLD lock where none recorded the host): what would change, which roles run, whether
    it reboots, what a running job would meet. No host is contacted. Exit 0; 2: bad input (a lock file
    missing or not a lock, NEW not fitting the table).
    """
    from gpuprov.lock_commands import diff as diffing

    diffing.run(opts)
