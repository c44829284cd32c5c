"""A sandbox node's /etc/hosts as a stock Debian or Ubuntu install leaves it.

Docker writes its own /etc/hosts into every container (the node's address beside its hostname), so a
node would resolve its hostname to the cluster network while a real Debian/Ubuntu server does not: their
installers map the hostname to 127.0.1.1. debian-installer's netcfg (netcfg-common.c) writes
`127.0.1.1\t<hostname>` when the host has no static address, with the IPv6 lines after it; the Debian
Reference (ch. 5.1.1 "The hostname resolution") documents the line; Ubuntu cloud images get the same
from cloud-init's templates/hosts.debian.tmpl (`127.0.1.1 {{fqdn}} {{hostname}}`, the same IPv6 lines).
A job that trusts the hostname then binds gloo to 127.0.1.1 (docs/launch.md, "Which interface"), so the
sandbox reproduces it. Docker rebuilds the file each time the container starts (it is a bind mount of a
file Docker owns), so it is written again after every start; the nodes reach each other by address
(ansible_host), which this leaves alone. Rocky nodes keep Docker's file: EL's installer writes no such line.
"""

from __future__ import annotations

from gpuprov.sandbox import docker

STOCK_OSES = ("debian12", "ubuntu22.04")  # the node OSes whose installers write 127.0.1.1

# The IPv6 lines as netcfg and cloud-init's hosts.debian.tmpl write them.
_IPV6_LINES = (
    "# The following lines are desirable for IPv6 capable hosts\n"
    "::1     localhost ip6-localhost ip6-loopback\n"
    "ff02::1 ip6-allnodes\n"
    "ff02::2 ip6-allrouters\n"
)


def stock(hostname: str) -> str:
    """/etc/hosts as netcfg writes it for a host without a static address and without a domain."""
    return f"127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n\n{_IPV6_LINES}"


def write(container: str, os_name: str, hostname: str) -> None:
    """Replace Docker's /etc/hosts in a started node with the stock one (in place: it is a bind mount)."""
    if os_name not in STOCK_OSES:
        return
    docker.run("exec", "-i", container, "sh", "-c", "cat > /etc/hosts", input=stock(hostname).encode())
