"""AttachedJob, the client side of a running job, event by event (no SSH: events are put on its queue)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov import ssh
from gpuprov.launch import jobs, stopping, stream
from gpuprov.launch.attached import AttachedJob


class FakeStream:
    """A host's channel: request_stop closes its stdin (the agent then stops the job)."""

    def __init__(self, alive: bool = True) -> None:
        self.alive, self.stop_requested, self.closed = alive, False, False

    def request_stop(self) -> bool:
        self.stop_requested = True
        return self.alive

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def stops(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The hosts each `agent.py stop` round was sent to."""
    calls: list[list[str]] = []

    def stop_hosts(clients: dict[str, Any], job: jobs.Job, python: Any = None) -> dict[str, str]:
        calls.append(sorted(clients))
        return {}

    monkeypatch.setattr(stopping, "stop_hosts", stop_hosts)
    return calls


def _attached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_fast: bool, grace_s: float = 5.0
) -> AttachedJob:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    names = ["node1", "node2", "node3"]
    job = jobs.Job(
        id="20250101-000000-abcd",
        script="train.py",
        args=[],
        hosts=[
            jobs.JobHost(n, "10.0.0.1", 22, "u", None, "/kh", "/py", rank, 1) for rank, n in enumerate(names)
        ],
        master="10.0.0.1:29500",
        detach=False,
        grace_s=grace_s,
    )
    printer = stream.Printer(names, {n: job.log_path(n) for n in names})
    job_ = AttachedJob(job, names, {n: object() for n in names}, printer, fail_fast=fail_fast)
    job_.streams = {n: FakeStream() for n in names}
    return job_


def _put(job: AttachedJob, host: str, kind: str, text: str = "", code: int | None = None) -> None:
    job.events.put(stream.Event(host, kind, text, code))


def test_the_first_failure_tears_down_the_others_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stops: list[list[str]]
) -> None:
    job = _attached(tmp_path, monkeypatch, fail_fast=True)
    _put(job, "node1", "line", "[rank0]: up")
    _put(job, "node2", "exit", code=3)
    _put(job, "node1", "exit", code=143)  # stopped by the teardown: not a failure of its own
    _put(job, "node3", "exit", code=0)
    job.wait()
    job.close()
    assert job.first_failure == "node2"
    assert job.stopped_by_us == {"node1", "node3"}
    assert job.codes == {"node2": 3, "node1": 143, "node3": 0}
    assert all(s.stop_requested for n, s in job.streams.items() if n != "node2")
    assert stops == []  # every channel was alive: closing stdin was enough
    assert job.job.log_path("node1").read_text() == "[rank0]: up\n"


def test_a_host_whose_channel_is_gone_is_stopped_over_ssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stops: list[list[str]]
) -> None:
    job = _attached(tmp_path, monkeypatch, fail_fast=True)
    job.streams["node3"] = FakeStream(alive=False)
    job.on_exit("node1", 1)
    assert stops == [["node3"]]


def test_a_lost_host_fails_the_job_and_is_stopped_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stops: list[list[str]]
) -> None:
    job = _attached(tmp_path, monkeypatch, fail_fast=True)
    job.on_lost("node2", "the SSH connection was lost")
    assert job.first_failure == "node2" and job.lost == {"node2": "the SSH connection was lost"}
    assert job.stopped_by_us == {"node1", "node3"}
    assert stops == [["node2"]]  # over a fresh connection, in case its agent did not notice


def test_watching_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stops: list[list[str]]
) -> None:
    job = _attached(tmp_path, monkeypatch, fail_fast=False)
    _put(job, "node1", "exit", code=3)
    _put(job, "node2", "lost", "the SSH connection was lost")
    _put(job, "node3", "exit", code=0)
    job.wait()
    assert job.teardown_started is None and stops == []
    assert not any(s.stop_requested for s in job.streams.values())
    assert job.codes == {"node1": 3, "node3": 0} and job.lost == {"node2": "the SSH connection was lost"}


def test_hosts_that_do_not_report_after_teardown_count_as_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stops: list[list[str]]
) -> None:
    monkeypatch.setattr(stopping, "STOP_EXTRA_S", 0.0)
    job = _attached(tmp_path, monkeypatch, fail_fast=True, grace_s=0.3)
    _put(job, "node1", "exit", code=2)
    job.wait()  # node2 and node3 never answer
    assert job.lost == {"node2": "did not report after teardown", "node3": "did not report after teardown"}


def test_interrupt_tears_down_and_collects_the_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stops: list[list[str]]
) -> None:
    job = _attached(tmp_path, monkeypatch, fail_fast=True)
    _put(job, "node1", "exit", code=130)
    _put(job, "node2", "lost", "the SSH connection was lost")
    _put(job, "node3", "exit", code=143)
    job.interrupt()
    assert job.interrupted and job.stopped_by_us == {"node1", "node2", "node3"}
    assert job.first_failure is None and stops == []  # the ends after Ctrl-C start nothing new
    assert job.codes == {"node1": 130, "node3": 143} and "node2" in job.lost


def test_close_prints_and_logs_lines_still_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = _attached(tmp_path, monkeypatch, fail_fast=True)
    _put(job, "node2", "line", "last words")
    job.close()
    assert job.job.log_path("node2").read_text() == "last words\n"
    assert all(s.closed for s in job.streams.values())


def test_a_host_that_cannot_start_fails_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stops: list[list[str]]
) -> None:
    job = _attached(tmp_path, monkeypatch, fail_fast=True)

    def refuse(*args: Any) -> None:
        raise ssh.SessionLost("not connected", OSError("not connected"))

    monkeypatch.setattr(ssh, "open_channel", refuse)
    assert job.open("node2", "agent attach") is False
    assert job.lost == {"node2": "could not start: not connected"} and job.first_failure == "node2"
    assert job.stopped_by_us == {"node1", "node3"}
