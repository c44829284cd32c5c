"""The remote agent, run here on real processes: start in its own session, exit codes, teardown that
reaches workers in sessions of their own, and leaves another job alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuprov.onhost import agent

AGENT = Path(agent.__file__)


def _job(tmp_path: Path, job_id: str, body: str) -> Path:
    jobdir = tmp_path / job_id
    jobdir.mkdir()
    (jobdir / "job_id").write_text(job_id)
    (jobdir / "run.sh").write_text(body)
    return jobdir


def _agent(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(AGENT), *args], capture_output=True, text=True, timeout=timeout
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] not in "ZX"
    except OSError:
        return False


def _wait_for(path: Path, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


# A job like torchrun's: a leader, and a "worker" in a session of its own that writes its pid.
_WORKERS = """
setsid sh -c 'echo $$ > worker.pid; exec sleep 300' &
echo leader up
sleep 300
"""


def test_start_exit_code_and_follow(tmp_path: Path) -> None:
    jobdir = _job(tmp_path, "j1", "echo one; echo two; exit 7\n")
    started = _agent("start", str(jobdir))
    assert started.returncode == 0 and int(started.stdout) > 1
    assert _wait_for(jobdir / "exit_code") == "7"
    followed = _agent("follow", str(jobdir), "0")
    assert followed.stdout == "one\ntwo\n"
    assert f"{agent.EVENT_PREFIX}exit 7" in followed.stderr


def test_stop_kills_workers_in_other_sessions_and_spares_other_jobs(tmp_path: Path) -> None:
    first = _job(tmp_path, "job-a", _WORKERS)
    second = _job(tmp_path, "job-b", _WORKERS)
    for jobdir in (first, second):
        assert _agent("start", str(jobdir)).returncode == 0
    workers = {jobdir.name: int(_wait_for(jobdir / "worker.pid")) for jobdir in (first, second)}
    leader_a = int((first / "pgid").read_text())
    assert os.getpgid(workers["job-a"]) != leader_a  # the worker has a group of its own
    assert len(agent.job_processes(str(first))) >= 3  # bash, sleep, the worker

    stopped = _agent("stop", str(first), "5")
    assert stopped.returncode == 0, stopped.stderr
    assert '"left": 0' in stopped.stdout
    assert not _alive(workers["job-a"]) and not _alive(leader_a)
    assert _wait_for(first / "exit_code") == str(128 + signal.SIGTERM)
    assert agent.job_processes(str(first)) == set()
    # The other job, same user, same commands, is untouched.
    assert _alive(workers["job-b"])
    assert '"state": "running"' in _agent("status", str(second)).stdout
    assert _agent("stop", str(second), "5").returncode == 0
    assert not _alive(workers["job-b"])


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    jobdir = _job(tmp_path, "stubborn", "trap '' TERM\necho ready\nwhile :; do sleep 0.1; done\n")
    assert _agent("start", str(jobdir)).returncode == 0
    time.sleep(0.3)
    began = time.monotonic()
    stopped = _agent("stop", str(jobdir), "1")
    assert '"left": 0' in stopped.stdout and '"killed": 0' not in stopped.stdout
    assert 1.0 <= time.monotonic() - began < 5
    assert _wait_for(jobdir / "exit_code") == str(128 + signal.SIGKILL)


def test_attach_stops_the_job_when_stdin_closes(tmp_path: Path) -> None:
    """The client going away (its SSH channel closing) stops the job: no orphans without a client."""
    jobdir = _job(tmp_path, "attached", _WORKERS)
    (jobdir / "grace").write_text("2")
    proc = subprocess.Popen(
        [sys.executable, str(AGENT), "attach", str(jobdir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    worker = int(_wait_for(jobdir / "worker.pid"))
    assert proc.stdout is not None and proc.stdout.readline() == "leader up\n"
    _, err = proc.communicate(input="", timeout=20)  # closes stdin
    assert f"{agent.EVENT_PREFIX}exit {128 + signal.SIGTERM}" in err
    assert not _alive(worker)
    assert agent.job_processes(str(jobdir)) == set()


def test_stop_signals_each_process_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second SIGTERM would interrupt torchrun's own shutdown of its workers: every process gets one."""
    jobdir = _job(tmp_path, "once", _WORKERS)
    assert _agent("start", str(jobdir)).returncode == 0
    _wait_for(jobdir / "worker.pid")
    pids = agent.job_processes(str(jobdir))
    groups = {pid: os.getpgid(pid) for pid in pids}
    received = dict.fromkeys(pids, 0)

    def killpg(pgrp: int, sig: int) -> None:
        for pid, group in groups.items():
            received[pid] += group == pgrp

    def kill(pid: int, sig: int) -> None:
        received[pid] += 1

    with monkeypatch.context() as patch:
        patch.setattr(agent.os, "killpg", killpg)
        patch.setattr(agent.os, "kill", kill)
        agent._signal_all(pids, signal.SIGTERM)
    assert len(set(groups.values())) >= 2  # the leader's group and the worker's own
    assert received == dict.fromkeys(pids, 1)
    assert _agent("stop", str(jobdir), "5").returncode == 0
