"""A job's record on this machine: state changes from several clients holding copies of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.launch import jobs


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path))
    return tmp_path


def _host() -> jobs.JobHost:
    return jobs.JobHost("node1", "10.0.0.1", 22, "u", None, "/k", "/usr/bin/python3", 0, 1)


def _job() -> jobs.Job:
    job = jobs.Job(
        id=jobs.new_id(), script="train.py", args=[], hosts=[_host()], master="10.0.0.1:29500",
        detach=True, grace_s=5, state=jobs.STARTING,
    )  # fmt: skip
    job.save()
    return job


def test_an_older_copy_cannot_overwrite_the_recorded_end() -> None:
    launcher = _job()
    follower = jobs.load(launcher.id)  # e.g. `logs -f`, read while the job ran
    launcher.finish("succeeded", {"node1": 0})
    follower.finish("failed", {"node1": 1})
    on_disk = jobs.load(launcher.id)
    assert (on_disk.state, on_disk.exit_codes) == ("succeeded", {"node1": 0})
    assert follower.state == "succeeded", "the late writer adopts the recorded end"


def test_a_job_being_stopped_ends_as_stopped_whoever_sees_it_end() -> None:
    launcher = _job()
    follower = jobs.load(launcher.id)
    stopper = jobs.load(launcher.id)
    assert stopper.mark(jobs.STOPPING)
    follower.finish("failed", {"node1": -15})  # the follower saw the ranks die of SIGTERM first
    stopper.finish("stopped", {"node1": -15})
    assert jobs.load(launcher.id).state == "stopped"


def test_running_does_not_undo_stopping_or_an_end() -> None:
    job = _job()
    stopper = jobs.load(job.id)
    stopper.mark(jobs.STOPPING)
    assert not job.mark(jobs.RUNNING)
    assert job.state == jobs.STOPPING
    stopper.finish("stopped", {})
    assert not job.mark(jobs.STOPPING)
    assert jobs.load(job.id).state == "stopped"


def test_an_ended_job_is_not_active() -> None:
    job = _job()
    assert job.state in jobs.ACTIVE_STATES
    job.finish("interrupted", {"node1": None})
    assert jobs.load(job.id).state not in jobs.ACTIVE_STATES
