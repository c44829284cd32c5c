"""A one-host batch's gate gets a healthy peer (gpuprov.upgrade.peers, through the rollout): an idle host in
service, upgraded first; a host still on the old lock only when the batch changes neither NCCL nor PyTorch."""

from __future__ import annotations

from pathlib import Path

from gpuprov.errors import ExitCode
from gpuprov.upgrade import rollout
from gpuprov.upgrade.progress import Reporter
from tests.unit.upgrade.fake_cluster import FakeSlurm, Work, new_rollout, steps

NODES = ["node1", "node2", "node3"]
BATCHES = [["node2"], ["node3"], ["node1"]]


def _run(tmp_path: Path, cluster: FakeSlurm, parts: list[str] | None = None) -> tuple[Work, Reporter]:
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)
    for entry in done.data["hosts"].values():
        entry["changes"] = {"parts": [{"component": part} for part in parts or ["driver"]]}
    events = Reporter(as_json=False, batches_total=3, rollout_id="r1")
    assert rollout.run(done, steps(cluster, work, gate_peer=True), events) == ExitCode.OK
    return work, events


def test_the_canary_takes_an_idle_host_not_yet_moved_then_upgraded_hosts_serve(tmp_path: Path) -> None:
    work, events = _run(tmp_path, FakeSlurm(NODES))
    assert work.peers == [["node3"], ["node2"], ["node2"]]
    notes = [e["note"] for e in events.events if e["event"] == "note"]
    assert notes[0] == "gate: the all-reduce crosses the network with node3 (not upgraded yet, idle)"
    assert notes[1] == "gate: the all-reduce crosses the network with node2 (upgraded, gate passed, idle)"


def test_the_peer_is_drained_for_the_gate_and_resumed_after(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    seen: list[tuple[str, str]] = []
    work = Work(cluster)
    gate = work.gate

    def gate_seeing_the_peer(names: list[str], peers: list[str]) -> dict[str, str]:
        seen.extend((p, cluster.nodes[p].state) for p in peers)
        return gate(names, peers)

    work.gate = gate_seeing_the_peer  # type: ignore[method-assign]
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, work, gate_peer=True), Reporter(False, 3, "r1")) == ExitCode.OK
    assert seen[0] == ("node3", "drained")  # no job could start there during the gate
    assert cluster.log[:4] == ["drain node2", "drain node3", "resume node3", "resume node2"]
    assert all(n.state == "idle" for n in cluster.nodes.values())
    assert not any(e.get("gate_peer_node") for e in done.data["hosts"].values())


def test_a_new_nccl_keeps_the_canary_alone_busy_and_drained_hosts_never_serve(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.nodes["node2"].jobs = {"9": 50.0}  # the canary's job ends after 50 s; node2 then moves
    work, events = _run(tmp_path, cluster, ["nccl", "driver"])
    assert work.peers == [[], ["node2"], ["node2"]]
    notes = [e["note"] for e in events.events if e["event"] == "note"]
    assert notes[0] == "gate: no healthy idle peer, so its all-reduce stays inside this host"


def test_a_host_already_on_the_new_lock_is_preferred_and_a_busy_one_skipped(tmp_path: Path) -> None:
    cluster = FakeSlurm([*NODES, "node4", "node5"])
    cluster.nodes["node4"].jobs = {"3": 10_000.0}
    cluster.nodes["node1"].state, cluster.nodes["node1"].reason = "drained", "RMA 12"
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)
    done.data["unchanged"] = {"node4": "node4", "node5": "node5"}
    assert rollout.run(done, steps(cluster, work, gate_peer=True), Reporter(False, 3, "r1")) == ExitCode.OK
    assert work.peers == [["node5"], ["node5"], ["node5"]]
    assert done.host("node2")["gate_peer"] == "node5"


def test_a_batch_of_several_hosts_and_the_quick_gate_get_no_peer(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    work = Work(cluster)
    done = new_rollout(tmp_path, [["node2", "node3"], ["node1"]], cluster)
    assert rollout.run(done, steps(cluster, work), Reporter(False, 2, "r1")) == ExitCode.OK
    assert work.peers == [[], []]
