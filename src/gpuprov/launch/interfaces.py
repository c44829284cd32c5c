"""Which interface and address each host's ranks use toward the others, from what its preflight found.

Without GLOO_SOCKET_IFNAME, gloo binds to the first address the machine's hostname resolves to that it
can bind (ProcessGroupGloo createDefaultDevice, doesHostnameResolveToUsableAddress); torchrun's c10d
rendezvous, without --local-addr, publishes the master's FQDN (torch.distributed.run: "Else, it will be
default to local machine's FQDN"). On a stock Debian or Ubuntu install the hostname resolves to 127.0.1.1
(/etc/hosts, written by the installer), so peers get "Gloo connectFullMesh failed ... 127.0.1.1:
Connection refused". Preflight asks each host (probe.py route) which local address and interface carry its
traffic to the master (the master: to the first worker): that interface goes to GLOO_SOCKET_IFNAME and
that address to torchrun's --local-addr (c10d), unless the user chose.

GLOO_SOCKET_IFNAME takes concrete interface names, comma-separated (torch's ProcessGroupGloo binding
splits it on ',' and makes a device per name with createDeviceForInterface); NCCL_SOCKET_IFNAME's syntax
(`^lo` to exclude, `eth` as a prefix, `=eth0` for an exact name: NCCL's environment variable docs) means
nothing to gloo, so a user's NCCL value is reused for gloo only when it is one name the host has.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

from gpuprov import hosts
from gpuprov.launch.preflight import INPUT, NOT_READY, HostCheck, Problem

ROUTE_ANSWER = "route "  # probe.py route's line: `route JSON`


@dataclass(frozen=True)
class Route:
    """A host's answer to probe.py route: toward which peer, through what."""

    toward: str  # the peer's address it was asked about
    source: str | None  # the local address the kernel picks toward it (None: no route)
    ifname: str | None  # the interface that holds that address (None: not found)
    hostname: str
    resolves: tuple[str, ...]  # what the hostname resolves to, in the resolver's order
    hosts_line: str | None  # the /etc/hosts line that names the hostname
    interfaces: tuple[str, ...]
    error: str | None = None

    @property
    def hostname_is_loopback(self) -> bool:
        """Whether gloo, left to the hostname, would bind a loopback address (no address at all: gloo's
        fallback is 127.0.0.1)."""
        return not self.resolves or _is_loopback(self.resolves[0])


def parse(line: str, toward: str) -> Route | None:
    """probe.py route's answer line (`route JSON`), None for anything else."""
    if not line.startswith(ROUTE_ANSWER):
        return None
    try:
        found = json.loads(line[len(ROUTE_ANSWER) :])
        return Route(
            toward=toward,
            source=found.get("source"),
            ifname=found.get("ifname"),
            hostname=str(found["hostname"]),
            resolves=tuple(str(a) for a in found.get("resolves") or ()),
            hosts_line=found.get("hosts_line"),
            interfaces=tuple(str(n) for n in found.get("interfaces") or ()),
            error=found.get("error"),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def user_gloo(host: hosts.Host) -> str | None:
    value = host.vars.get("gloo_socket_ifname") or host.vars.get("gpuprov_gloo_socket_ifname")
    return str(value) if value else None


def user_nccl(host: hosts.Host) -> str | None:
    value = host.vars.get("nccl_socket_ifname") or host.vars.get("gpuprov_nccl_socket_ifname")
    return str(value) if value else None


def concrete_name(nccl_value: str, route: Route | None) -> str | None:
    """An NCCL_SOCKET_IFNAME value as a gloo interface name: only one name (`eth0` or NCCL's exact `=eth0`)
    that the host has; None for a list, an exclusion (`^lo`) or a prefix that names no interface."""
    name = nccl_value.removeprefix("=")
    if not name or any(c in name for c in ",^= "):
        return None
    return name if route is not None and name in route.interfaces else None


def socket_env(host: hosts.Host, route: Route | None) -> dict[str, str]:
    """NCCL_SOCKET_IFNAME (the user's, as given) and GLOO_SOCKET_IFNAME: the user's gloo value, else the
    NCCL value where it is one name the host has, else the interface toward the peers (none: unset)."""
    env: dict[str, str] = {}
    nccl = user_nccl(host)
    if nccl:
        env["NCCL_SOCKET_IFNAME"] = nccl
    gloo = user_gloo(host) or (concrete_name(nccl, route) if nccl else None) or (route and route.ifname)
    if gloo:
        env["GLOO_SOCKET_IFNAME"] = gloo
    return env


def local_addr(route: Route | None) -> str | None:
    """torchrun's --local-addr for c10d: the address the host's traffic to its peers leaves from."""
    return route.source if route is not None and route.ifname else None


def problems(host: hosts.Host, route: Route | None, multi_host: bool) -> list[Problem]:
    """A user's gloo value that names no interface of the host; a hostname that resolves to loopback
    where gloo would still use it (no interface for it). Nothing for a one-host job."""
    if not multi_host or route is None:
        return []
    given = user_gloo(host)
    if given:
        missing = [name for name in given.split(",") if name not in route.interfaces]
        if not missing:
            return []
        fix = f"e.g. {route.ifname}, the interface toward {route.toward}" if route.ifname else "e.g. eth0"
        has = ", ".join(route.interfaces)
        return [
            Problem(
                INPUT,
                f"{host.name}: gloo_socket_ifname {given!r} names no interface of the host "
                f"({', '.join(missing)}; it has {has}); gloo takes concrete interface names, comma-separated,"
                f" not NCCL's ^/prefix syntax: set it to one ({fix})",
            )
        ]
    if socket_env(host, route).get("GLOO_SOCKET_IFNAME") or not route.hostname_is_loopback:
        return []
    line = route.hosts_line or f"{route.hostname} has no address"
    why = route.error or (f"{route.source} is on none of its interfaces" if route.source else "no route")
    return [
        Problem(
            NOT_READY,
            f"{host.name}: its hostname {route.hostname} resolves to loopback (/etc/hosts: `{line}`), where "
            f"gloo would bind and its peers could not connect, and no interface toward {route.toward} was "
            f"found ({why}); set gloo_socket_ifname for the host, or map the hostname to its "
            "cluster address in /etc/hosts",
        )
    ]


def template_problems(checks: list[HostCheck], templates: dict[str, Path | None]) -> list[Problem]:
    """A user's template that leaves out the job's environment (`env`: GLOO_SOCKET_IFNAME among it) on a
    host whose hostname resolves to loopback: gloo there would bind to it."""
    from gpuprov.launch import render

    if len(checks) < 2:
        return []
    found = []
    for check in checks:
        template, route = templates.get(check.host.name), check.route
        if template is None or route is None or not route.hostname_is_loopback:
            continue
        if "env" not in render.variables(template):
            found.append(
                Problem(
                    NOT_READY,
                    f"{check.host.name}: the template {template} does not export the job's environment "
                    f"(`env`), and the hostname {route.hostname} resolves to loopback (/etc/hosts: "
                    f"`{route.hosts_line}`), so gloo would bind there; export `env` in the template as "
                    "gpuprov's own does (templates/torchrun.sh.j2), or set GLOO_SOCKET_IFNAME in it",
                )
            )
    return found
