"""Which inventory, and which of its hosts, a job runs on."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from gpuprov import hosts
from gpuprov.errors import BadInput

INVENTORY_ENV = "GPUPROV_INVENTORY"
DEFAULT_INVENTORY = Path("inventory.ini")


def inventory_path(given: Path | None) -> Path:
    """-i, then $GPUPROV_INVENTORY, then ./inventory.ini."""
    if given is not None:
        return given
    from_env = os.environ.get(INVENTORY_ENV)
    if from_env:
        return Path(from_env).expanduser()
    if DEFAULT_INVENTORY.exists():
        return DEFAULT_INVENTORY
    raise BadInput(
        f"no inventory found: pass -i INVENTORY, set ${INVENTORY_ENV}, or put an inventory.ini in "
        f"{Path.cwd()}"
    )


def select(inventory: hosts.Inventory, nodes: int | None, names: tuple[str, ...]) -> list[hosts.Host]:
    """--hosts H1,H2 in that order, or the first --nodes N hosts, or every host. The first is the master."""
    # A job's host names become its log files' names (HOST.log): hosts.load has refused any that could not.
    return _select(inventory, nodes, names)


def _select(inventory: hosts.Inventory, nodes: int | None, names: tuple[str, ...]) -> list[hosts.Host]:
    if names:
        unknown = [name for name in names if name not in inventory.names]
        if unknown:
            raise BadInput(
                f"--hosts: {', '.join(unknown)} not in {inventory.path} (group {inventory.group} has "
                f"{', '.join(inventory.names)})"
            )
        return [inventory.host(name) for name in names]
    if nodes is None:
        return list(inventory.hosts)
    if nodes > len(inventory.hosts):
        raise BadInput(
            f"--nodes {nodes} is more than the {len(inventory.hosts)} host(s) in {inventory.path} "
            f"(group {inventory.group}: {', '.join(inventory.names)}); lower --nodes or add hosts"
        )
    return list(inventory.hosts[:nodes])


def master_address(master: hosts.Host, count: int) -> str:
    """The address other hosts reach the master at: gpuprov_master_addr, else the SSH address."""
    address = str(master.vars.get("gpuprov_master_addr") or master.address)
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
