"""Slurm through the controller (gpuprov.upgrade.service): real sinfo output read (Debian 12's Slurm 22.05.8,
tests/recorded/slurm/), the commands sent, and what a sudo user and a root user send."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts, ssh
from gpuprov.errors import GpuprovError
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


def test_node_names_are_the_short_hostnames_and_a_lost_host_is_exit_6(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = {"10.0.0.1": "gpu01.cluster.example\n", "10.0.0.2": "gpu02\n"}
    monkeypatch.setattr(ssh, "connect", lambda host, timeout=0: host)
    monkeypatch.setattr(
        ssh, "run", lambda client, command, timeout=60: ssh.Result(0, names[client.address], "")
    )
    monkeypatch.setattr(hosts.Host, "close", lambda self: None, raising=False)
    inventory = hosts.Inventory(
        Path("inv.ini"),
        [hosts.Host(f"n{i}", f"10.0.0.{i}", 22, "ops", None, Path("/dev/null")) for i in (1, 2)],
    )
    assert service.node_names(inventory) == {"n1": "gpu01", "n2": "gpu02"}
    assert service.missing_nodes(
        {"n1": "gpu01", "n2": "gpu02"}, {"gpu01": service.NodeState("idle", "")}
    ) == ["n2 (hostname gpu02)"]

    def refused(host: hosts.Host, timeout: float = 0) -> None:
        raise ssh.Unreachable("connection refused")

    monkeypatch.setattr(ssh, "connect", refused)
    with pytest.raises(GpuprovError, match=r"n1 \(10.0.0.1:22\): cannot read its hostname") as caught:
        service.node_names(inventory)
    assert caught.value.exit_code == 6
