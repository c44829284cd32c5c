"""The host-selection options `gpuprov launch` and `gpuprov bench` share: --nodes N or --hosts H1,H2.

One definition of the click options and of their check, so both commands take and refuse the same input.
Light on purpose (click only): the commands' help and input errors load nothing that reaches a host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from gpuprov.errors import BadInput

F = TypeVar("F", bound=Callable[..., object])


def host_selection(command: F) -> F:
    """Add --nodes (passed as `nodes`) and --hosts (passed as `host_list`) to a click command."""
    command = click.option(
        "--hosts",
        "host_list",
        default=None,
        help="Use these hosts of the inventory, comma-separated; the first is the master.",
    )(command)
    return click.option(
        "--nodes", type=int, default=None, help="Use the first N hosts of the inventory [default: all]."
    )(command)


def parse_hosts(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise BadInput(
            "--hosts is empty: give inventory host names separated by commas, e.g. --hosts node1,node2"
        )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise BadInput(f"--hosts names {', '.join(duplicates)} more than once; list each host once")
    return names


def check(nodes: int | None, hosts: str | None) -> tuple[int | None, tuple[str, ...]]:
    """The node count and the host names; BadInput (one line, exit 2) for a wrong or conflicting one."""
    if nodes is not None and hosts is not None:
        raise BadInput("--nodes and --hosts exclude each other: give a count or a list of hosts")
    if nodes is not None and nodes < 1:
        raise BadInput(f"--nodes {nodes} is not valid: give 1 or more")
    return nodes, parse_hosts(hosts) if hosts is not None else ()
