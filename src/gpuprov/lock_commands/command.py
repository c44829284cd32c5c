"""The `gpuprov lock` commands: `lock check`'s options (each written once), then its checking module."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from gpuprov import cli_options, host_options
from gpuprov.errors import BadInput, ExitCode, Finished


def _lock_path(given: str) -> Path:
    if not given.strip():
        raise BadInput("the lock file path is empty; give a YAML file with a 'gpu_stack:' mapping")
    return Path(given).expanduser()


def _finish(opts: LockCheckOptions) -> LockCheckOptions:
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
