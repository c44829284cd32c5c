"""The master port on a real 2-node sandbox (issue 28, item 9): a launch on the port of a job that is
starting is refused before any of its ranks starts, a port a starting launch holds is refused in
preflight, and a relaunch right after a job on the same port is not refused because of TIME_WAIT. Shares
the session's launch sandbox. The ports are in the range the sandbox's firewall opens between nodes
(29400-29599, roles/network_tuning)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import Sandbox
from tests.integration.job_scripts import write_sleeper
from tests.integration.launch.conftest import container, docker_exec, gp, job_processes

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
        ["docker", "exec", "-u", "gpuprov", node1, "python3", "-c", _HOLD_CLAIM.format(port=29581)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None
    pid = holder.stdout.readline().strip()
    try:
        assert pid.isdigit()
        proc = gp(
            launch_sandbox, "launch", "--nodes", "2", "--master-port", "29581", str(write_sleeper(tmp_path))
        )
        assert "master port 29581 is in use on node1" in _one_error(proc, 2)
    finally:
        docker_exec(node1, "kill", pid)
        holder.wait(timeout=30)


def test_a_launch_on_the_port_of_a_starting_job(launch_sandbox: Sandbox, tmp_path: Path) -> None:
    """The second launch's preflight runs while the first job's torchrun may still be importing torch (not
    listening yet): the first job holds the port from its push on, so the second is refused (exit 2) and
    none of its ranks starts. (Two preflights at the very same moment each find the other's test listener
    on the port and may both be refused; never both started.)"""
    sleeper = str(write_sleeper(tmp_path))
    before = _running_jobs(launch_sandbox)
    first = gp(launch_sandbox, "launch", "--nodes", "2", "--master-port", "29582", "--detach", sleeper)
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.strip()
    try:
        second = gp(launch_sandbox, "launch", "--nodes", "2", "--master-port", "29582", sleeper)
        line = _one_error(second, 2)
        assert "master port 29582 is in use on node1" in line or "master port 29582 is taken" in line, line
        assert _running_jobs(launch_sandbox) - before == {job_id}  # nothing of the refused one runs
    finally:
        gp(launch_sandbox, "stop", job_id)
    for node in ("node1", "node2"):
        assert job_processes(container(launch_sandbox, node), job_id) == []


def test_a_relaunch_on_the_same_port_right_after_a_job(launch_sandbox: Sandbox, tmp_path: Path) -> None:
    script = tmp_path / "barrier.py"
    script.write_text(BARRIER)
    # static, then c10d (where the master hosts the store: --rdzv-conf is_host=1) on the same port
    for rdzv in ("static", "c10d"):
        proc = gp(
            launch_sandbox, "launch", "--nodes", "2", "--master-port", "29583", "--rdzv", rdzv, str(script)
        )
        assert proc.returncode == 0, f"launch with --rdzv {rdzv}: {proc.stderr}"
        assert "rank 1 passed the barrier" in proc.stdout
