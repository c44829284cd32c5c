"""gpuprov.launch.slurm_nodes: the default partition's nodes from recorded `sinfo` output of Debian 12's real
Slurm 22.05.8 (tests/recorded/slurm/), which of them can take a job, and which inventory host each is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import slurm_nodes
from gpuprov.launch.slurm_nodes import SlurmNode

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "slurm"


def recorded(name: str) -> str:
    return (RECORDED / f"{name}-22.05.8").read_text()


def test_idle_nodes_of_the_default_partition() -> None:
    part = slurm_nodes.default_partition(recorded("sinfo-nodes-idle"))
    assert part is not None and part.name == "gpu" and part.names == ["node1", "node2"]
    assert [(n.state, n.reason, n.unavailable, n.busy) for n in part.nodes] == [
        ("idle", "", False, False)
    ] * 2
    assert part.nodes[0].hostname == "node1" and part.nodes[0].address.count(".") == 3  # NodeAddr: the IPv4
    slurm_nodes.check_available(part, 2, "node1")
    assert slurm_nodes.busy_note(part, 2) is None


def test_a_drained_node_is_named_with_slurms_reason_and_launch_exits_7() -> None:
    part = slurm_nodes.default_partition(recorded("sinfo-nodes-drained"))
    assert part is not None
    drained = part.nodes[1]
    assert drained.state == "drained" and drained.unavailable
    assert drained.reason == "gpuprov test: a GPU fell off the bus"  # %E: the reason alone
    slurm_nodes.check_available(part, 1, "node1")  # one node can still run
    with pytest.raises(GpuprovError) as raised:
        slurm_nodes.check_available(part, 2, "node1")
    assert raised.value.exit_code == ExitCode.PREFLIGHT_FAILED
    message = str(raised.value)
    assert (
        "partition gpu has 1 that can take a job (node1); unavailable: node2 (drained: gpuprov test:"
        in message
    )
    assert "\n" not in message


def test_a_busy_node_queues_the_job_and_says_so() -> None:
    part = slurm_nodes.default_partition(recorded("sinfo-nodes-allocated"))
    assert part is not None
    assert [n.state for n in part.nodes] == ["allocated", "allocated"]
    slurm_nodes.check_available(part, 2, "node1")  # not refused: the job waits for them
    note = slurm_nodes.busy_note(part, 1)
    assert note == "0 of the 1 node(s) it needs are free now; busy: node1 (allocated), node2 (allocated)"


def test_a_node_that_has_not_registered_is_unavailable() -> None:
    part = slurm_nodes.default_partition(recorded("sinfo-nodes-unknown"))
    assert part is not None
    assert all(n.unavailable for n in part.nodes)
    with pytest.raises(GpuprovError, match=r"node1 \(not registered with slurmctld"):
        slurm_nodes.check_available(part, 1, "node1")


@pytest.mark.parametrize(
    ("state", "unavailable", "busy"),
    [
        # sinfo(1) NODE STATE CODES; suffixes as real clusters show them (e.g. `drng@`, `fail*`, `down$` in
        # ArjunaCluster/ArjunaUsers#69 and #85)
        ("down*", True, False),
        ("idle*", True, False),
        ("draining@", True, False),
        ("down$", True, False),
        ("fail*", True, False),
        ("inval", True, False),
        ("mixed", False, True),
        ("completing", False, True),
        # powered off or powering up/down (power saving): Slurm would start it, gpuprov cannot push to it
        ("idle~", True, False),
        ("idle#", True, False),
        ("idle%", True, False),
        ("idle", False, False),
        ("allocated", False, True),
    ],
)
def test_states(state: str, unavailable: bool, busy: bool) -> None:
    node = SlurmNode("gpu01", "gpu01", "10.0.0.1", state, "")
    assert (node.unavailable, node.busy) == (unavailable, busy)


def test_a_powered_off_node_says_why_it_is_left_out() -> None:
    node = SlurmNode("gpu01", "gpu01", "10.0.0.1", "idle~", "")
    assert node.describe() == (
        "gpu01 (idle~: powered off (Slurm's power saving); gpuprov cannot push the job's files to it)"
    )


def test_no_default_partition() -> None:
    assert slurm_nodes.default_partition("node1|gpu|node1|10.0.0.1|idle|none\n") is None


def _inventory(*names_and_addresses: tuple[str, str]) -> hosts.Inventory:
    return hosts.Inventory(
        Path("inv.ini"), [hosts.Host(n, a, 22, "u", None, Path("/k")) for n, a in names_and_addresses]
    )


NODE = SlurmNode("gpu01", "gpu01", "10.0.0.1", "idle", "")


@pytest.mark.parametrize(
    ("inventory", "expected"),
    [
        (_inventory(("gpu01", "10.9.9.9"), ("gpu02", "10.0.0.2")), "gpu01"),  # by name
        (_inventory(("gpu01.cluster.example.com", "10.0.0.1")), "gpu01.cluster.example.com"),  # NodeAddr
        (_inventory(("10.0.0.1", "10.0.0.1"), ("10.0.0.2", "10.0.0.2")), "10.0.0.1"),  # an IP inventory
        (_inventory(("gpu01.cluster.example.com", "192.168.1.1")), "gpu01.cluster.example.com"),  # the FQDN
    ],
)
def test_the_inventory_host_of_a_slurm_node(inventory: hosts.Inventory, expected: str) -> None:
    assert slurm_nodes.inventory_host(inventory, NODE, "gpu").name == expected


def test_a_node_two_hosts_could_be_is_refused() -> None:
    inventory = _inventory(("gpu01.a.example", "192.168.1.1"), ("gpu01.b.example", "192.168.1.2"))
    with pytest.raises(BadInput, match=re.escape("could be any of gpu01.a.example, gpu01.b.example")):
        slurm_nodes.inventory_host(inventory, NODE, "gpu")


def test_a_node_no_host_is_is_refused() -> None:
    with pytest.raises(
        BadInput, match=r"node gpu01 of partition gpu \(NodeHostName gpu01, NodeAddr 10.0.0.1\)"
    ):
        slurm_nodes.inventory_host(_inventory(("10.0.0.7", "10.0.0.7")), NODE, "gpu")
