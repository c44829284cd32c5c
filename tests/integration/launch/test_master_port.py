"""The master port on a real 2-node sandbox (issue 28, item 9): two launches at once on one --master-port
start one job, never two (the other is refused before any of its ranks starts), a port a starting launch
holds is refused in preflight, and a relaunch right after a job on the same port is not refused because of
TIME_WAIT. Shares the session's launch sandbox."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, Sandbox
from tests.integration.job_scripts import write_sleeper
from tests.integration.launch.conftest import container, docker_exec, gp, job_processes, launch_env

pytestmark = pytest.mark.integration

# A barrier through the store on the master port, so the job leaves its connections to close (TIME_WAIT).
BARRIER = """
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
print(f"rank {dist.get_rank()} passed the barrier", flush=True)
dist.destroy_process_group()
"""

_HOLD_CLAIM = (
    "import fcntl, os, time; fd = os.open('/tmp/gpuprov-master-port-{port}.lock', os.O_RDONLY | os.O_CREAT, "
    "0o644); fcntl.flock(fd, fcntl.LOCK_EX); print(os.getpid(), flush=True); time.sleep(120)"
)


def _one_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and proc.returncode == code and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def _running_jobs(sandbox: Sandbox) -> set[str]:
    """The ids of the gpuprov jobs with processes on either node."""
    script = (
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | sed -n 's/^GPUPROV_JOB_ID=//p' | sort -u"
    )
    found: set[str] = set()
    for node in ("node1", "node2"):
        found |= set(docker_exec(container(sandbox, node), "sh", "-c", script).stdout.split())
    return found


def test_a_port_a_starting_launch_holds_is_refused_in_preflight(
    launch_sandbox: Sandbox, tmp_path: Path
) -> None:
    """As between another launch's push and its torchrun's bind: nothing listens yet, the port is held."""
    node1 = container(launch_sandbox, "node1")
    holder = subprocess.Popen(
        ["docker", "exec", "-u", "gpuprov", node1, "python3", "-c", _HOLD_CLAIM.format(port=29781)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None
    pid = holder.stdout.readline().strip()
    try:
        assert pid.isdigit()
        proc = gp(
            launch_sandbox, "launch", "--nodes", "2", "--master-port", "29781", str(write_sleeper(tmp_path))
        )
        assert "master port 29781 is in use on node1" in _one_error(proc, 2)
    finally:
        docker_exec(node1, "kill", pid)
        holder.wait(timeout=30)


def test_two_launches_at_once_on_one_port_start_one_job(launch_sandbox: Sandbox, tmp_path: Path) -> None:
    sleeper = write_sleeper(tmp_path)
    before = _running_jobs(launch_sandbox)
    command = [
        str(BIN / "gpuprov"),
        "launch",
        "--nodes",
        "2",
        "--master-port",
        "29782",
        "--detach",
        str(sleeper),
    ]
    procs = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=launch_env(launch_sandbox)
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=180) for p in procs]
    started = [out.strip() for p, (out, _) in zip(procs, results, strict=True) if p.returncode == 0]
    try:
        assert len(started) == 1, results
        refused = next(
            subprocess.CompletedProcess(p.args, p.returncode, out, err)
            for p, (out, err) in zip(procs, results, strict=True)
            if p.returncode != 0
        )
        line = _one_error(refused, 2)
        assert "master port 29782 is in use on node1" in line or "master port 29782 is taken" in line, line
        deadline = time.monotonic() + 30
        while _running_jobs(launch_sandbox) - before != set(started) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _running_jobs(launch_sandbox) - before == set(started)  # nothing of the refused one runs
    finally:
        for job_id in started:
            gp(launch_sandbox, "stop", job_id)
    for job_id in started:
        for node in ("node1", "node2"):
            assert job_processes(container(launch_sandbox, node), job_id) == []


def test_a_relaunch_on_the_same_port_right_after_a_job(launch_sandbox: Sandbox, tmp_path: Path) -> None:
    script = tmp_path / "barrier.py"
    script.write_text(BARRIER)
    for attempt in range(2):
        proc = gp(launch_sandbox, "launch", "--nodes", "2", "--master-port", "29783", str(script))
        assert proc.returncode == 0, f"launch {attempt + 1}: {proc.stderr}"
        assert "rank 1 passed the barrier" in proc.stdout
