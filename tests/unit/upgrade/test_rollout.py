"""The rollout against a Slurm cluster in memory: the issue's done-when cases at the level of the steps (a
running job, an administrator's drain, a failed gate, Ctrl-C then --resume, the drain timeout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuprov.errors import ExitCode
from gpuprov.upgrade import rollout, state
from gpuprov.upgrade.progress import Reporter
from tests.unit.upgrade.fake_cluster import FakeSlurm, Work, new_rollout, reporter, steps

NODES = ["node1", "node2", "node3"]
BATCHES = [["node2"], ["node3"], ["node1"]]  # canary node2, then node3, node1 (the controller) last


def test_every_node_moves_the_job_ends_untouched_and_the_admins_drain_stays(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.nodes["node3"].jobs = {"41": 25.0}  # a job on node3 ends at t=25 s
    cluster.nodes["node1"].state, cluster.nodes["node1"].reason = "drained", "bad fan (admin)"
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, work), reporter()) == ExitCode.OK
    assert work.applied == [["node2"], ["node3"], ["node1"]]
    assert work.gated == work.applied
    assert cluster.now >= 25.0  # node3 waited for its job, which was never cancelled
    assert cluster.nodes["node3"].jobs == {}
    assert cluster.nodes["node1"].state == "drained" and cluster.nodes["node1"].reason == "bad fan (admin)"
    assert "drain node1" not in cluster.log and "resume node1" not in cluster.log
    assert [cluster.nodes[n].state for n in ("node2", "node3")] == ["idle", "idle"]
    saved = json.loads((tmp_path / state.ROLLOUT).read_text())
    assert saved["status"] == "done"
    assert {h: e["phase"] for h, e in saved["hosts"].items()} == dict.fromkeys(NODES, "done")


def test_a_failed_gate_stops_at_the_budget_with_the_host_drained_and_later_batches_untouched(
    tmp_path: Path,
) -> None:
    cluster = FakeSlurm(NODES)
    work = Work(cluster)
    work.fail_gate = {"node3"}
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, work, max_failures=1), reporter()) == ExitCode.FAILURE
    assert work.applied == [["node2"], ["node3"]]  # node1's batch never started
    node3 = cluster.nodes["node3"]
    assert node3.state == "drained"
    assert node3.reason.startswith("gpuprov upgrade r1 failed: gate: cuda: 12.4.1 installed")
    assert cluster.nodes["node1"].state == "idle" and "drain node1" not in cluster.log
    assert done.data["status"] == "stopped" and done.host("node3")["phase"] == state.FAILED


def test_a_failed_canary_stops_whatever_the_budget(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    work = Work(cluster)
    work.fail_gate = {"node2"}
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, work, max_failures=3), reporter()) == ExitCode.FAILURE
    assert work.applied == [["node2"]]


def test_ctrl_c_mid_batch_then_resume_does_not_redo_finished_hosts(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    work = Work(cluster)
    work.interrupt_at = "node3"
    done = new_rollout(tmp_path, BATCHES, cluster)
    with pytest.raises(KeyboardInterrupt):
        rollout.run(done, steps(cluster, work), reporter())
    saved = json.loads((tmp_path / state.ROLLOUT).read_text())  # what a new process reads
    assert saved["hosts"]["node2"]["phase"] == "done"
    assert saved["hosts"]["node3"]["phase"] == "applying" and saved["hosts"]["node3"]["drained_by_us"]
    assert cluster.nodes["node3"].state == "drained"  # stays out of service until the rollout goes on
    again = state.Rollout(tmp_path, saved)
    assert rollout.run(again, steps(cluster, work), reporter()) == ExitCode.OK
    assert work.applied == [["node2"], ["node3"], ["node1"]]  # node2 once only
    assert all(cluster.nodes[n].state == "idle" for n in NODES)


def test_jobs_past_the_drain_timeout_are_never_killed_the_host_fails(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.nodes["node2"].jobs = {"7": 10_000.0}
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)
    code = rollout.run(done, steps(cluster, work, drain_timeout_s=60.0), reporter())
    assert code == ExitCode.FAILURE and work.applied == []
    assert cluster.nodes["node2"].jobs == {"7": 10_000.0}
    assert "Slurm job 7 still running after --drain-timeout" in cluster.nodes["node2"].reason


def test_kill_jobs_cancels_at_the_timeout_records_it_and_names_it_in_the_reason(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.nodes["node2"].jobs = {"7": 10_000.0}
    work = Work(cluster)
    reasons: list[str] = []
    drain = cluster.drain

    def drain_seen(node: str, reason: str) -> None:
        reasons.append(reason)
        drain(node, reason)

    cluster.drain = drain_seen  # type: ignore[method-assign]
    stopped: list[str] = []
    own = {"20261127-0101-ab": ["node2"]}

    def ssh_jobs(names: list[str]) -> dict[str, list[str]]:
        return {job: on for job, on in own.items() if job not in stopped}

    events = Reporter(as_json=False, batches_total=3, rollout_id="r1")
    done = new_rollout(tmp_path, BATCHES, cluster)
    run = steps(cluster, work, drain_timeout_s=60.0, kill_jobs=True, stop_job=stopped.append)
    run.ssh_jobs = ssh_jobs
    assert rollout.run(done, run, events) == ExitCode.OK
    assert "scancel 7" in cluster.log and stopped == ["20261127-0101-ab"]
    assert cluster.log.index("scancel 7") < cluster.log.index("resume node2")
    assert done.host("node2")["killed"] == ["Slurm job 7", "gpuprov job 20261127-0101-ab"]
    assert "--kill-jobs cancelled Slurm job 7, gpuprov job 20261127-0101-ab" in reasons[1]
    killing = [e for e in events.events if e["event"] == "killing"]
    assert killing == [
        {**killing[0], "host": "node2", "jobs": ["Slurm job 7", "gpuprov job 20261127-0101-ab"]}
    ]
    assert work.applied[0] == ["node2"]


def test_a_job_that_outlives_kill_jobs_fails_its_host(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.nodes["node2"].jobs = {"7": 10_000.0}
    cluster.stubborn = {"7"}
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)
    run = steps(cluster, work, drain_timeout_s=60.0, kill_jobs=True)
    assert rollout.run(done, run, reporter()) == ExitCode.FAILURE
    assert work.applied == [] and cluster.log.count("scancel 7") == 1
    assert "Slurm job 7 still running 180 s after --kill-jobs cancelled them" in cluster.nodes["node2"].reason


def test_a_node_an_admin_drains_during_the_rollout_is_not_resumed(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    work = Work(cluster)

    def gate(names: list[str], peers: list[str]) -> dict[str, str]:
        cluster.nodes["node2"].reason = "RMA ticket 12 (admin)"  # set while gpuprov held it
        return {}

    work.gate = gate  # type: ignore[method-assign]
    done = new_rollout(tmp_path, [["node2"]], cluster)
    assert rollout.run(done, steps(cluster, work), reporter()) == ExitCode.OK
    assert cluster.nodes["node2"].state == "drained" and "resume node2" not in cluster.log


def test_a_node_an_admin_drains_after_the_rollout_began_is_never_drained_by_gpuprov(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)  # the plan saw node1 in service
    cluster.nodes["node1"].state, cluster.nodes["node1"].reason = "drained", "RMA ticket 12 (admin)"
    assert rollout.run(done, steps(cluster, work), reporter()) == ExitCode.OK
    assert cluster.nodes["node1"].reason == "RMA ticket 12 (admin)"
    assert "drain node1" not in cluster.log and "resume node1" not in cluster.log
    assert done.host("node1")["admin_drained"] and done.host("node1")["phase"] == state.DONE


def test_a_down_node_is_drained_for_its_upgrade_and_never_resumed_by_gpuprov(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.nodes["node3"].state, cluster.nodes["node3"].reason = "down", "Not responding"
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, work), reporter()) == ExitCode.OK
    node3 = cluster.nodes["node3"]
    assert "drain node3" in cluster.log and "resume node3" not in cluster.log
    assert node3.state == "drained" and node3.reason.endswith("; down before (Not responding)")
    assert done.host("node3")["phase"] == state.DONE


def test_a_node_in_a_reservation_is_drained_and_resumed_like_any(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.nodes["node3"].state = "reserved"
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, Work(cluster)), reporter()) == ExitCode.OK
    assert "drain node3" in cluster.log and "resume node3" in cluster.log


def test_a_node_still_draining_without_a_listed_job_is_waited_for(tmp_path: Path) -> None:
    cluster = FakeSlurm(NODES)
    cluster.draining_until["node2"] = 45.0  # e.g. a job in stage-out: squeue's states do not list it
    work = Work(cluster)
    done = new_rollout(tmp_path, [["node2"]], cluster)
    assert rollout.run(done, steps(cluster, work), reporter()) == ExitCode.OK
    assert cluster.now >= 45.0 and work.applied == [["node2"]]


@pytest.mark.parametrize(
    ("shown", "said"),
    [
        (("idle", "", False), "idle and not responding"),  # slurmd did not start: sinfo's "idle*"
        (("drained", "gres/gpu count reported lower than configured (4 < 8)", True), "gres/gpu count"),
    ],
)
def test_a_node_slurm_does_not_take_back_fails_drained_with_what_slurm_shows(
    tmp_path: Path, shown: tuple[str, str, bool], said: str
) -> None:
    cluster = FakeSlurm(NODES)
    cluster.after_resume["node2"] = shown
    work = Work(cluster)
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, work, max_failures=3), reporter()) == ExitCode.FAILURE
    assert work.applied == [["node2"]]  # the canary: nothing else touched
    node2 = cluster.nodes["node2"]
    assert node2.state == "drained" and node2.reason.startswith(
        "gpuprov upgrade r1 failed: Slurm did not take"
    )
    assert said in done.host("node2")["error"] and done.host("node2")["phase"] == state.FAILED
    assert cluster.now >= 120.0  # it was given return_timeout_s


def test_the_events_name_each_step_and_the_time_left_comes_from_the_batches_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = FakeSlurm(NODES)
    work = Work(cluster)
    real_apply = work.apply

    def slow_apply(names: list[str]) -> dict[str, str]:
        cluster.now += 100.0  # each batch takes 100 s of the fake clock
        return real_apply(names)

    work.apply = slow_apply  # type: ignore[method-assign]
    events = Reporter(as_json=True, batches_total=3, rollout_id="r1")
    done = new_rollout(tmp_path, BATCHES, cluster)
    assert rollout.run(done, steps(cluster, work), events) == ExitCode.OK
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in lines][:6] == ["batch", "phase", "phase", "phase", "done", "batch_done"]
    batches = [e for e in lines if e["event"] == "batch"]
    assert batches[0]["eta_s"] is None and batches[1]["eta_s"] == 200 and batches[2]["eta_s"] == 100
    assert lines[-1]["event"] == "finished" and lines[-1]["hosts"] == ["node2", "node3", "node1"]
