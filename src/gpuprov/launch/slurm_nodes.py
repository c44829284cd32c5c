"""The nodes of Slurm's default partition as `sinfo` lists them: which can take a job, and which inventory
host each one is.

`sinfo --Node --format` with `%N` (NodeName), `%P` (partition, `*` after the default), `%n`
(NodeHostName), `%o` (NodeAddr), `%T` (the state, long form) and `%E` (the reason a node is down or
drained; "none" without one): sinfo(1). A node that is down, drained or draining, failed or failing,
not responding (`*` after the state) or not registered yet takes no new job until an administrator or
slurmd brings it back, so a job that needs it would wait in the queue for ever (PENDING, e.g. Reason
ReqNodeNotAvail): launch refuses it and names those nodes. A busy node (allocated, mixed, completing) will
take the job when its current one ends, and a powered-down one (`~`) is woken by Slurm's power saving: the
job queues, and launch says so.

Slurm names a node by its short host name (slurmd finds its own line by `hostname -s`; the slurm role
writes NodeName from the host's `ansible_facts.hostname`), while an inventory may name hosts by FQDN or
address. A Slurm node is the inventory host of the same name, else the one named by its NodeHostName, else
the one whose address (`ansible_host`) is its NodeAddr, else the one whose FQDN's first label is its name.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from gpuprov import hosts
from gpuprov.errors import BadInput, ExitCode, GpuprovError

SINFO_FORMAT = "%N|%P|%n|%o|%T|%E"
# Long-form states (sinfo(1), "NODE STATE CODES") in which a node takes no new job until it is fixed.
UNAVAILABLE_STATES = frozenset(
    {"down", "drained", "draining", "drain", "fail", "failing", "future", "inval", "unknown", "maint"}
)  # fmt: skip
NOT_RESPONDING = "*"  # the suffix sinfo puts after the state of a node that does not answer slurmctld
# Suffixes of a state (sinfo(1)): powering down or up, power saving, reboot, maintenance reservation, planned.
_STATE_SUFFIXES = "*~#%!@^$-"
# Powered off, powering up or down, or about to power down (sinfo(1)): Slurm would start it for a job, but
# gpuprov cannot push the job's files to it over SSH first, so such a node is left out of the job.
_POWERED_OFF = "~#%!"


@dataclass(frozen=True)
class SlurmNode:
    name: str  # NodeName
    hostname: str  # NodeHostName
    address: str  # NodeAddr
    state: str  # sinfo's long form, with its suffix (e.g. "drained", "idle~", "down*")
    reason: str  # why it is down or drained; "" without one

    @property
    def base_state(self) -> str:
        return self.state.rstrip(_STATE_SUFFIXES).split("+")[0]

    @property
    def powered_off(self) -> bool:
        return any(mark in self.state for mark in _POWERED_OFF)

    @property
    def unavailable(self) -> bool:
        return self.base_state in UNAVAILABLE_STATES or NOT_RESPONDING in self.state or self.powered_off

    @property
    def busy(self) -> bool:
        # planned: held for a job; reserved: in an advanced reservation; blocked (23.x): a job's topology
        return self.base_state in ("allocated", "mixed", "completing", "planned", "reserved", "blocked")

    def describe(self) -> str:
        if NOT_RESPONDING in self.state and self.base_state not in UNAVAILABLE_STATES:
            why = "not responding to slurmctld"
        elif self.powered_off and self.base_state not in UNAVAILABLE_STATES:
            why = (
                f"{self.state}: powered off (Slurm's power saving); gpuprov cannot push the job's files to it"
            )
        elif self.base_state == "unknown":
            why = "not registered with slurmctld (is slurmd running there?)"
        else:
            why = self.base_state
        return f"{self.name} ({why}{f': {self.reason}' if self.reason else ''})"


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: list[SlurmNode]

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]


def listed_nodes(sinfo_output: str) -> list[tuple[str, SlurmNode]]:
    """Each line of `sinfo --noheader --Node --format SINFO_FORMAT` as (its partition, as sinfo prints it,
    `*` included; the node). A node in several partitions is listed once per partition. The reason is the
    last field: it may hold a '|' of its own."""
    listed = []
    for line in sinfo_output.splitlines():
        fields = line.split("|", 5)
        if len(fields) != 6 or not fields[0].strip():
            continue
        reason = fields[5].strip()
        node = SlurmNode(
            fields[0].strip(), fields[2], fields[3], fields[4].strip(), "" if reason == "none" else reason
        )
        listed.append((fields[1], node))
    return listed


def default_partition(sinfo_output: str) -> Partition | None:
    """The default partition (`*` after its name) and its nodes, from `sinfo --noheader --Node --format
    SINFO_FORMAT`; None when no partition is the default."""
    nodes: dict[str, SlurmNode] = {}
    name = None
    for partition, node in listed_nodes(sinfo_output):
        if partition.endswith("*"):
            name = partition.rstrip("*")
            nodes[node.name] = node
    if name is None:
        return None
    return Partition(name, sorted(nodes.values(), key=lambda n: n.name))


def check_available(part: Partition, nnodes: int, controller: str) -> None:
    """Refuse (exit 7) a job of nnodes nodes that the partition's nodes which can take jobs cannot hold."""
    usable = [n for n in part.nodes if not n.unavailable]
    if nnodes <= len(usable):
        return
    down = "; ".join(n.describe() for n in part.nodes if n.unavailable)
    up = ", ".join(n.name for n in usable) or "none"
    raise GpuprovError(
        f"Slurm on {controller}: {nnodes} node(s) asked, and partition {part.name} has {len(usable)} that "
        f"can take a job ({up}); unavailable: {down}. Bring them back (fix the node, then `scontrol update "
        "nodename=NODE state=resume`) or ask for fewer with --nodes",
        ExitCode.PREFLIGHT_FAILED,
    )


def busy_note(part: Partition, nnodes: int) -> str | None:
    """What makes the job wait, when fewer nodes than it needs are free now."""
    free = [n for n in part.nodes if not n.unavailable and not n.busy]
    if nnodes <= len(free):
        return None
    busy = ", ".join(f"{n.name} ({n.base_state})" for n in part.nodes if n.busy)
    return f"{len(free)} of the {nnodes} node(s) it needs are free now; busy: {busy}"


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def inventory_host(inventory: hosts.Inventory, node: SlurmNode, partition: str) -> hosts.Host:
    """The inventory host that is this Slurm node (see the module's docstring for the order)."""
    found = matching_host(inventory, node)
    if found is not None:
        return found
    raise BadInput(
        f"{inventory.path}: node {node.name} of partition {partition} (NodeHostName {node.hostname}, "
        f"NodeAddr {node.address}) is no host of group [{inventory.group}] by name, FQDN or address "
        "(ansible_host); add it (gpuprov pushes the job's code to it)"
    )


def matching_host(inventory: hosts.Inventory, node: SlurmNode) -> hosts.Host | None:
    """The inventory host that is this Slurm node, None when none is; BadInput when several could be.
    The one way gpuprov maps hosts to Slurm nodes (launch --scheduler slurm, upgrade)."""
    rules = (
        lambda h: h.name == node.name,
        lambda h: h.name == node.hostname,
        lambda h: h.address in (node.address, node.hostname),
        lambda h: not _is_address(h.name) and h.name.split(".")[0] == node.name,
    )
    for rule in rules:
        found = [h for h in inventory.hosts if rule(h)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise BadInput(
                f"{inventory.path}: Slurm node {node.name} (NodeAddr {node.address}) could be any of "
                f"{', '.join(h.name for h in found)}; give each host an ansible_host that tells them apart"
            )
    return None


def node_names(inventory: hosts.Inventory, sinfo_output: str) -> dict[str, str]:
    """Each inventory host's Slurm node name, from `sinfo --noheader --Node --format SINFO_FORMAT` of every
    node (matching_host's rules); a host no node matches is left out."""
    found: dict[str, str] = {}
    for _partition, node in listed_nodes(sinfo_output):
        host = matching_host(inventory, node)
        if host is not None:
            found.setdefault(host.name, node.name)
    return found
