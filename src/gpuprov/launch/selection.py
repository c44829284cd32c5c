"""Which inventory, and which of its hosts, a job runs on."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Protocol

from gpuprov import host_options, hosts, inventory_cache
from gpuprov.errors import BadInput

# A DNS name, an IPv4 address or an IPv6 one (bare or in brackets): no blanks, quotes or shell characters.
_ADDRESS = re.compile(r"[A-Za-z0-9_.:%\[\]-]{1,253}")


class HostChoice(Protocol):
    """The options that choose a job's hosts (LaunchOptions, BenchOptions)."""

    @property
    def inventory(self) -> Path | None: ...
    @property
    def limit(self) -> str | None: ...
    @property
    def nodes(self) -> int | None: ...
    @property
    def hosts(self) -> tuple[str, ...]: ...


def chosen(opts: HostChoice) -> tuple[hosts.Inventory, list[hosts.Host]]:
    """The inventory (narrowed by --limit) and the hosts --hosts or --nodes pick from it."""
    # Cached: an unchanged inventory is not parsed by Ansible again on every launch (inventory_cache.py).
    inventory = inventory_cache.load(host_options.inventory_path(opts.inventory), opts.limit)
    return inventory, select(inventory, opts.nodes, opts.hosts, opts.limit)


def select(
    inventory: hosts.Inventory, nodes: int | None, names: tuple[str, ...], limit: str | None = None
) -> list[hosts.Host]:
    """--hosts H1,H2 in that order, or the first --nodes N hosts, or every host. The first is the master.

    inventory is what --limit left of it (limit names it in the messages)."""
    # A job's host names become its log files' names (HOST.log): hosts.load has refused any that could not.
    where = f"{inventory.path}" if limit is None else f"{inventory.path} --limit {limit!r}"
    if names:
        unknown = [name for name in names if name not in inventory.names]
        if unknown:
            raise BadInput(
                f"--hosts: {', '.join(unknown)} not in {where} (group {inventory.group} has "
                f"{', '.join(inventory.names)})"
            )
        return [inventory.host(name) for name in names]
    if nodes is None:
        return list(inventory.hosts)
    if nodes > len(inventory.hosts):
        raise BadInput(
            f"--nodes {nodes} is more than the {len(inventory.hosts)} host(s) in {where} "
            f"(group {inventory.group}: {', '.join(inventory.names)}); lower --nodes or add hosts"
        )
    return list(inventory.hosts[:nodes])


def master_address(master: hosts.Host, count: int) -> str:
    """The address other hosts reach the master at: gpuprov_master_addr, else the SSH address."""
    address = str(master.vars.get("gpuprov_master_addr") or master.address)
    if not _ADDRESS.fullmatch(address):  # it goes into every host's script and the port test's lines
        raise BadInput(
            f"master {master.name} has address {address!r}, which is not a host name or an address; fix its "
            "gpuprov_master_addr (or ansible_host) in the inventory"
        )
    if count > 1 and _is_loopback(address):
        raise BadInput(
            f"master {master.name} has address {address}, a loopback address the other hosts cannot reach; "
            "set its ansible_host (or gpuprov_master_addr) to an address on the cluster network"
        )
    return address


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
