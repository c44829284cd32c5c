"""Slurm through the controller (gpuprov.upgrade.service): real sinfo output read (Debian 12's Slurm 22.05.8,
tests/recorded/slurm/), the commands sent, and what a sudo user and a root user send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts, ssh
from gpuprov.errors import BadInput, GpuprovError
from gpuprov.upgrade import service

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "slurm"


def test_the_recorded_drained_node_is_out_of_service_and_not_ours() -> None:
    states = service.parse_sinfo((RECORDED / "sinfo-nodes-drained-22.05.8").read_text())
    assert states["node1"] == service.NodeState("idle", "")
    node2 = states["node2"]
    assert node2.state == "drained" and node2.reason == "gpuprov test: a GPU fell off the bus"
    assert node2.out_of_service and not node2.ours


@pytest.mark.parametrize("name", ["idle", "allocated", "unknown"])
def test_the_recorded_nodes_in_service(name: str) -> None:
    states = service.parse_sinfo((RECORDED / f"sinfo-nodes-{name}-22.05.8").read_text())
    assert sorted(states) == ["node1", "node2"]
    assert not any(state.out_of_service for state in states.values())


def test_a_non_responding_mark_and_a_reason_with_a_bar() -> None:
    line = "node3|gpu*|node3|10.0.0.3|drained*|gpuprov upgrade r1 failed: gate: a|b\n"
    state = service.parse_sinfo(line)["node3"]
    assert state.state == "drained" and state.reason == "gpuprov upgrade r1 failed: gate: a|b" and state.ours


class _Client:
    def close(self) -> None:
        pass


def _slurm(monkeypatch: pytest.MonkeyPatch, user: str, answers: list[Any]) -> tuple[service.Slurm, list[str]]:
    sent: list[str] = []

    def run(client: Any, command: str, timeout: float = 60) -> ssh.Result:
        sent.append(command)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    monkeypatch.setattr(ssh, "connect", lambda host, timeout=0: _Client())
    monkeypatch.setattr(ssh, "run", run)
    host = hosts.Host("node1", "10.0.0.1", 22, user, None, Path("/dev/null"))
    return service.Slurm(host, sleep=lambda s: None), sent


def test_drain_resume_and_jobs_as_a_sudo_user(monkeypatch: pytest.MonkeyPatch) -> None:
    ok = ssh.Result(0, "", "")
    slurm, sent = _slurm(monkeypatch, "ops", [ok, ok, ssh.Result(0, "41\n42\n", "")])
    slurm.drain("node2", "gpuprov upgrade r1: moving to the new lock; don't")
    slurm.resume("node2")
    assert slurm.jobs("node2") == ["41", "42"]
    assert sent == [
        "sudo -n scontrol update NodeName=node2 State=DRAIN Reason='gpuprov upgrade r1: moving to the new "
        "lock; don'\"'\"'t'",
        "sudo -n scontrol update NodeName=node2 State=RESUME",
        "sudo -n squeue -h -w node2 -t RUNNING,COMPLETING,SUSPENDED,CONFIGURING -o %A",
    ]


def test_root_needs_no_sudo_and_sinfo_asks_for_the_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = (RECORDED / "sinfo-nodes-idle-22.05.8").read_text()
    slurm, sent = _slurm(monkeypatch, "root", [ssh.Result(0, recorded, "")])
    assert sorted(slurm.states(["node1", "node2"])) == ["node1", "node2"]
    assert sent == ["sinfo --noheader --Node --nodes=node1,node2 --format '%N|%P|%n|%o|%T|%E'"]


def test_a_controller_coming_back_is_retried_then_a_failure_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lost = ssh.SessionLost("connection reset", OSError())
    down = ssh.Result(1, "", "slurm_load_node: Unable to contact slurm controller (connect failure)")
    slurm, sent = _slurm(monkeypatch, "root", [lost, down, ssh.Result(0, "", "")])
    slurm.resume("node2")
    assert len(sent) == 3
    slurm, sent = _slurm(monkeypatch, "root", [down] * service.ATTEMPTS)
    with pytest.raises(
        GpuprovError, match="resuming node2 failed on the Slurm controller node1: slurm_load_node"
    ):
        slurm.resume("node2")


def _inventory(*members: tuple[str, str]) -> hosts.Inventory:
    return hosts.Inventory(
        Path("inv.ini"),
        [hosts.Host(name, address, 22, "ops", None, Path("/dev/null")) for name, address in members],
    )


def test_node_names_are_slurms_own_matched_as_launch_matches_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded sinfo of every node (node1 172.19.0.4, node2 172.19.0.5): one host named by its FQDN,
    one by an alias whose ansible_host is the node's NodeAddr; a host Slurm has no node for is missing."""
    recorded = (RECORDED / "sinfo-nodes-idle-22.05.8").read_text()
    slurm, sent = _slurm(monkeypatch, "root", [ssh.Result(0, recorded, "")])
    inventory = _inventory(
        ("node1.cluster.example", "10.9.0.1"), ("gpu-b", "172.19.0.5"), ("gpu-c", "10.9.0.3")
    )
    nodes = slurm.node_names(inventory)
    assert nodes == {"node1.cluster.example": "node1", "gpu-b": "node2"}
    assert sent == ["sinfo --noheader --Node --format '%N|%P|%n|%o|%T|%E'"]
    assert service.missing_nodes(inventory, nodes) == ["gpu-c"]


def test_two_hosts_that_could_be_one_node_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = (RECORDED / "sinfo-nodes-idle-22.05.8").read_text()
    slurm, _sent = _slurm(monkeypatch, "root", [ssh.Result(0, recorded, "")])
    inventory = _inventory(("node1.a.example", "10.9.0.1"), ("node1.b.example", "10.9.0.2"))
    with pytest.raises(
        BadInput, match=r"Slurm node node1 .* could be any of node1\.a\.example, node1\.b\.example"
    ):
        slurm.node_names(inventory)


@pytest.mark.parametrize(
    "answer",
    [
        # Slurm 22.05.8, recorded: an unknown job id is no error (exit 0; --verbose says why on stderr).
        ssh.Result(0, "", (RECORDED / "scancel-verbose-unknown-job-22.05.8").read_text()),
        # Older releases exited non-zero (gwforg/gwf#259, `scancel --verbose` of an ended job).
        ssh.Result(1, "", "scancel: error: Kill job error on job id 42: Invalid job id specified"),
    ],
)
def test_scancel_as_a_sudo_user_and_a_job_that_ended_meanwhile_is_no_failure(
    monkeypatch: pytest.MonkeyPatch, answer: ssh.Result
) -> None:
    """Its exit status is not trusted either way: squeue, asked next, says what still runs."""
    slurm, sent = _slurm(monkeypatch, "ops", [answer])
    slurm.cancel(["41", "42"])
    slurm.cancel([])
    assert sent == ["sudo -n scancel 41 42"]


def test_a_node_whose_slurmd_does_not_answer_is_not_serving() -> None:
    # sinfo(1), NODE STATE CODES: "*  The node is presently not responding and will not be allocated any
    # new work."; the line is the recorded idle one with the mark added.
    states = service.parse_sinfo(
        "node1|gpu*|node1|172.19.0.4|idle*|none\nnode2|gpu*|node2|172.19.0.5|idle|none\n"
    )
    assert states["node1"] == service.NodeState("idle", "", responding=False)
    assert not states["node1"].serving and states["node2"].serving
