"""The `gpuprov check` command: options to CheckOptions, then gpuprov.check.flow."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from gpuprov import console
from gpuprov.ansible.arguments import parse_extra_vars
from gpuprov.check import options
from gpuprov.errors import BadInput


@click.command("check")
@click.argument("inventory", required=False)
@click.option("--limit", default=None, help="Only the hosts this Ansible pattern matches.")
@click.option("--only", default=None, help=f"Only these checks (comma list): {', '.join(options.ALL_NAMES)}.")
@click.option("--skip", default=None, help="Leave these checks out (comma list).")
@click.option("--quick", is_flag=True, help="Per-host checks only (seconds): no port or bandwidth test.")
@click.option("--json", "as_json", is_flag=True, help="Print every result as JSON on stdout.")
@click.option(
    "-e",
    "--extra-vars",
    "extra_vars",
    multiple=True,
    help="KEY=VALUE or @FILE (YAML/JSON), over the inventory's variables (e.g. -e @lock.yml).",
)
def check(
    inventory: str | None,
    limit: str | None,
    only: str | None,
    skip: str | None,
    quick: bool,
    as_json: bool,
    extra_vars: tuple[str, ...],
) -> None:
    """Check that the hosts are what the lock says, healthy, and reach each other.

    INVENTORY defaults to $GPUPROV_INVENTORY, then ./inventory.ini. Nothing is installed or changed on a
    host. Exit 0: every check passed (warnings listed); 1: a check failed; 8: a check could not run and
    none failed; 2: bad input (before any host is contacted).
    """
    path = inventory if inventory is not None else os.environ.get("GPUPROV_INVENTORY") or "inventory.ini"
    if not path.strip():
        raise BadInput("the inventory path is empty; give the path of an INI or YAML inventory")
    opts = options.CheckOptions(
        inventory=Path(path),
        limit=limit,
        only=options.parse_names(only, "--only"),
        skip=options.parse_names(skip, "--skip"),
        quick=quick,
        as_json=as_json,
        extra_vars=parse_extra_vars(extra_vars),
        verbose=console.verbosity() >= console.Verbosity.VERBOSE,
    )
    from gpuprov.check import flow  # SSH and the launch flow: only once the options are good

    sys.exit(int(flow.run(opts)))
