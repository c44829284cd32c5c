"""`gpuprov launch --launcher mpirun` end to end on node1 and node2 of the launch sandbox, after the mpi role
(Open MPI from Debian's archive through the sandbox mirror, the run user's node-to-node SSH) was applied to
them by `gpuprov bootstrap -e mpi_enabled=true --tags mpi`: real Open MPI, real SSH between the nodes, real
process trees checked on the nodes (no orted and no rank left after any ending).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Sandbox
from tests.integration.job_scripts import write_sleeper
from tests.integration.launch.conftest import REPO, container, docker_exec, gp, job_processes
from tests.integration.launch.test_launch import _job_id

pytestmark = pytest.mark.integration

EXAMPLE = str(REPO / "examples" / "train_ddp.py")
MPI_SWITCH = "mpi_enabled=true"  # the mpi role's switch in site.yml
NODES = ("node1", "node2")


@pytest.fixture(scope="module")
def mpi_sandbox(launch_sandbox: Sandbox) -> Iterator[Sandbox]:
    """The launch sandbox's node1 and node2 with the mpi role applied (once per module)."""
    if not (REPO / "roles" / "mpi").is_dir():
        pytest.skip("the mpi role (roles/mpi) is not in this checkout; it installs Open MPI on the nodes")
    # The nodes are bootstrapped already (launch_sandbox): only the mpi role (its site.yml tag) is new.
    proc = gp(launch_sandbox, "bootstrap", str(launch_sandbox.inventory), "--limit", "node1,node2",
              "-e", MPI_SWITCH, "--tags", "mpi", timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    yield launch_sandbox


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sleeper(tmp_path_factory.mktemp("mpirun-scripts"))


def _left(sandbox: Sandbox, job_id: str) -> dict[str, list[str]]:
    """Per node: the job's processes (its id in their environment) and any orted of the run user."""
    found = {}
    for node in NODES:
        name = container(sandbox, node)
        orted = docker_exec(name, "pgrep", "-u", "gpuprov", "-a", "orted").stdout.splitlines()
        found[node] = job_processes(name, job_id) + orted
    return found


def _until_nothing_left(sandbox: Sandbox, job_id: str, within_s: float) -> float:
    began = time.monotonic()
    while any(_left(sandbox, job_id).values()):
        assert time.monotonic() - began < within_s, f"left after {within_s} s: {_left(sandbox, job_id)}"
        time.sleep(0.5)
    return time.monotonic() - began


def test_training_across_two_nodes_under_mpirun(mpi_sandbox: Sandbox, tmp_path: Path) -> None:
    ckpt = f"/tmp/ckpt-mpirun-{tmp_path.name}.pt"
    proc = gp(mpi_sandbox, "launch", "--launcher", "mpirun", "--nodes", "2", EXAMPLE, "--", "--epochs", "2",
              "--checkpoint", ckpt)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "all-reduce agreement OK: world 2, sum of ranks 1 (expected 1)" in proc.stdout
    # Both ranks' lines came through mpirun on node1 and are shown under their own hosts.
    assert "rank 1/2 on node2: started" in proc.stdout and "node2/1" in proc.stdout
    assert "rank 0/2 on node1: started" in proc.stdout and "node1/0" in proc.stdout
    job_id = _job_id(proc.stderr)
    assert _left(mpi_sandbox, job_id) == {node: [] for node in NODES}
    jobs = gp(mpi_sandbox, "jobs")
    line = next(line for line in jobs.stdout.splitlines() if line.startswith(job_id))
    assert "succeeded" in line and "node1=0, node2=0" in line
    logs = gp(mpi_sandbox, "logs", job_id)
    assert logs.returncode == 0 and "all-reduce agreement OK" in logs.stdout and "node2/1" in logs.stdout


def test_a_crashed_rank_ends_every_rank_on_every_host(mpi_sandbox: Sandbox, sleeper: Path) -> None:
    began = time.monotonic()
    proc = gp(mpi_sandbox, "launch", "--launcher", "mpirun", "--nodes", "2", "--env", "CRASH=1", str(sleeper))
    elapsed = time.monotonic() - began
    assert proc.returncode == 1, proc.stderr
    job_id = _job_id(proc.stderr)
    assert "rank 1 fails now" in proc.stdout
    # mpirun's own verdict (Open MPI 4.1, named after argv[0]: Debian's mpirun.openmpi), then gpuprov's:
    # node1's mpirun exited with the rank's status.
    assert "mpirun.openmpi detected that one or more processes exited with non-zero status" in proc.stdout
    assert f"error: job {job_id} failed: node1 exited with 3; the other hosts were stopped" in proc.stderr
    assert _left(mpi_sandbox, job_id) == {node: [] for node in NODES}
    assert elapsed < 90


def test_a_killed_rank_of_a_detached_job_leaves_nothing(mpi_sandbox: Sandbox, sleeper: Path) -> None:
    """No gpuprov is attached: mpirun alone must end the job when a rank on the other host is killed."""
    proc = gp(mpi_sandbox, "launch", "--launcher", "mpirun", "--nodes", "2", "--detach", str(sleeper))
    assert proc.returncode == 0, proc.stderr
    job_id = _job_id(proc.stdout + proc.stderr)
    node2 = container(mpi_sandbox, "node2")
    deadline = time.monotonic() + 120
    rank = []
    while not rank and time.monotonic() < deadline:
        rank = [line for line in job_processes(node2, job_id) if "sleeper.py" in line]
        time.sleep(0.5)
    assert rank, f"no rank of {job_id} came up on node2"
    assert docker_exec(node2, "kill", "-KILL", rank[0].split()[0]).returncode == 0
    took = _until_nothing_left(mpi_sandbox, job_id, within_s=30)
    print(f"killed rank -> nothing left on either node in {took:.1f} s")
    assert "failed" in next(line for line in gp(mpi_sandbox, "jobs").stdout.splitlines() if job_id in line)


def test_logs_and_stop_of_a_detached_job(mpi_sandbox: Sandbox, sleeper: Path) -> None:
    proc = gp(mpi_sandbox, "launch", "--launcher", "mpirun", "--nodes", "2", "--detach", str(sleeper))
    assert proc.returncode == 0, proc.stderr
    job_id = _job_id(proc.stdout + proc.stderr)
    deadline = time.monotonic() + 120
    logs = gp(mpi_sandbox, "logs", job_id)
    while "rank 1 up" not in logs.stdout and time.monotonic() < deadline:
        time.sleep(1)
        logs = gp(mpi_sandbox, "logs", job_id)
    lines = [line.split() for line in logs.stdout.splitlines()]
    assert ["node1/0", "|", "rank", "0", "up"] in lines and ["node2/1", "|", "rank", "1", "up"] in lines
    assert all(_left(mpi_sandbox, job_id).values())  # running on both nodes (orted on node2)
    stop = gp(mpi_sandbox, "stop", job_id)
    assert stop.returncode == 0, stop.stderr
    assert f"Job {job_id} stopped on 2 host(s); no process of it is left" in stop.stderr + stop.stdout
    assert _left(mpi_sandbox, job_id) == {node: [] for node in NODES}


def test_dry_run_shows_the_mpirun_line(mpi_sandbox: Sandbox) -> None:
    proc = gp(mpi_sandbox, "launch", "--launcher", "mpirun", "--nodes", "2", "--dry-run", EXAMPLE)
    assert proc.returncode == 0, proc.stderr
    # Open MPI's mpirun by the absolute path the mpi role installs, tried in the script
    assert "for m in /usr/bin/mpirun.openmpi /usr/lib64/openmpi/bin/mpirun; do" in proc.stdout
    assert 'exec "$mpirun" \\\n  --hostfile ' in proc.stdout and "--bind-to none --map-by slot" in proc.stdout
    assert "mpirun_standby.py" in proc.stdout  # node2's script
