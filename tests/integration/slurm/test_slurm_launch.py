"""`gpuprov launch --scheduler slurm` on the two-node Slurm of the sandbox (real Debian Slurm, gloo on CPU):
training, a failing rank, stop, a queued job, and jobs/logs after the client exited."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, Sandbox
from tests.integration.job_scripts import write_sleeper
from tests.integration.launch.conftest import REPO, docker_exec, python_processes
from tests.integration.slurm.conftest import node_container

pytestmark = pytest.mark.integration

EXAMPLE = str(REPO / "examples" / "train_ddp.py")


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sleeper(tmp_path_factory.mktemp("slurm-scripts"))


def gp(sandbox: Sandbox, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**sandbox.env, "COLUMNS": "200"}
    return subprocess.run(
        [str(BIN / "gpuprov"), *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def job_id_in(output: str) -> str:
    for word in output.split():
        if word.count("-") == 2 and word[:8].isdigit() and len(word) == 20:
            return word
    raise AssertionError(f"no job id in:\n{output}")


def slurm_queue(sandbox: Sandbox) -> str:
    return docker_exec(node_container(sandbox, "node1"), "squeue", "--noheader", "--format=%i %T %r").stdout


def assert_nothing_left(sandbox: Sandbox) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = {n: python_processes(node_container(sandbox, n)) for n in ("node1", "node2")}
        if not slurm_queue(sandbox).strip() and not any(left.values()):
            return
        time.sleep(1)
    raise AssertionError(f"Slurm queue {slurm_queue(sandbox)!r}, processes {left}")


def wait_until_idle(sandbox: Sandbox, within: float = 120) -> None:
    deadline = time.monotonic() + within
    states = ""
    while time.monotonic() < deadline:
        states = docker_exec(
            node_container(sandbox, "node1"), "sinfo", "--noheader", "--Node", "--format=%t"
        ).stdout
        if states.split() == ["idle", "idle"]:
            return
        time.sleep(2)
    raise AssertionError(f"the nodes are not idle again after slurmctld restarted: {states!r}")


def test_ddp_training_on_two_nodes_through_slurm(slurm_cluster: Sandbox) -> None:
    # The nodes have a stock Debian /etc/hosts (the hostname on 127.0.1.1: gpuprov.sandbox.etc_hosts), where
    # gloo and the c10d rendezvous would bind loopback: the script finds each node's interface on the node.
    for node in ("node1", "node2"):
        hosts_file = docker_exec(node_container(slurm_cluster, node), "cat", "/etc/hosts").stdout
        assert f"127.0.1.1\t{node}\n" in hosts_file, hosts_file
    proc = gp(slurm_cluster, "launch", "--scheduler", "slurm", "--nodes", "2", EXAMPLE, "--", "--epochs", "1")
    assert proc.returncode == 0, proc.stderr
    assert "all-reduce agreement OK: world 2, sum of ranks 1 (expected 1)" in proc.stdout
    # host/rank prefixes; c10d numbers the nodes in the order of the addresses they publish (torch's
    # dynamic_rendezvous: sorted participants), so either node may hold rank 0.
    assert {"node1/0", "node2/1"} <= set(proc.stdout.split()) or {"node1/1", "node2/0"} <= set(
        proc.stdout.split()
    ), proc.stdout
    # Each node's route, found on the node (in the order srun returns them).
    routes = next(line for line in proc.stdout.splitlines() if "gpuprov-routes:" in line).split()
    found = {"=".join(r.split("=")[:2]) for r in routes if "=" in r}
    assert found == {"node1=eth0", "node2=eth0"}, proc.stdout
    job_id = job_id_in(proc.stderr)
    assert "submitted to Slurm as job" in proc.stderr
    # After the client has exited: jobs shows Slurm's view, logs reads the batch host's output.
    jobs = gp(slurm_cluster, "jobs")
    line = next(line for line in jobs.stdout.splitlines() if line.startswith(job_id))
    assert "succeeded (slurm " in line, line
    logs = gp(slurm_cluster, "logs", job_id)
    assert logs.returncode == 0, logs.stderr
    assert "all-reduce agreement OK" in logs.stdout and "node2/" in logs.stdout
    assert_nothing_left(slurm_cluster)


def test_a_failing_rank_ends_the_allocation(slurm_cluster: Sandbox, sleeper: Path) -> None:
    began = time.monotonic()
    proc = gp(
        slurm_cluster, "launch", "--scheduler", "slurm", "--nodes", "2", "--env", "CRASH=1", str(sleeper)
    )
    assert proc.returncode not in (0, 2), proc.stderr  # the job's own exit code
    assert "ended FAILED" in proc.stderr, proc.stderr
    assert "rank 1 fails now" in proc.stdout
    assert time.monotonic() - began < 90
    assert_nothing_left(slurm_cluster)


def test_stop_a_running_job_and_a_second_one_queues_behind_it(slurm_cluster: Sandbox, sleeper: Path) -> None:
    first = gp(slurm_cluster, "launch", "--scheduler", "slurm", "--nodes", "2", "--detach", str(sleeper))
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.strip().splitlines()[-1]
    second = gp(slurm_cluster, "launch", "--scheduler", "slurm", "--nodes", "1", "--detach", str(sleeper))
    assert second.returncode == 0, second.stderr
    second_id = second.stdout.strip().splitlines()[-1]
    assert f"Job {second_id} is queued" in second.stderr and "position 1" in second.stderr, second.stderr
    jobs = gp(slurm_cluster, "jobs").stdout
    assert "pending" in next(line for line in jobs.splitlines() if line.startswith(second_id))
    stopped = gp(slurm_cluster, "stop", first_id)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped (Slurm job" in stopped.stderr
    # The second job runs once the first has freed the nodes.
    deadline = time.monotonic() + 30
    while "RUNNING" not in slurm_queue(slurm_cluster) and time.monotonic() < deadline:
        time.sleep(1)
    assert "RUNNING" in slurm_queue(slurm_cluster)
    assert gp(slurm_cluster, "stop", second_id).returncode == 0
    assert_nothing_left(slurm_cluster)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--nodes", "3"], "--nodes 3: Slurm's partition gpu has 2 node(s)"),
        (["--hosts", "node1"], "--hosts picks hosts for SSH launching"),
    ],
)
def test_bad_input_submits_nothing(slurm_cluster: Sandbox, sleeper: Path, args: list[str], text: str) -> None:
    before = slurm_queue(slurm_cluster)
    proc = gp(slurm_cluster, "launch", "--scheduler", "slurm", *args, str(sleeper))
    assert proc.returncode == 2, proc.stderr
    assert text in proc.stderr
    assert slurm_queue(slurm_cluster) == before


def test_no_controller_in_the_inventory(slurm_cluster: Sandbox, sleeper: Path, tmp_path: Path) -> None:
    plain = tmp_path / "inventory.ini"
    plain.write_text(slurm_cluster.inventory.read_text().split("[slurm_controller]")[0])
    proc = gp(slurm_cluster, "launch", "-i", str(plain), "--scheduler", "slurm", str(sleeper))
    assert proc.returncode == 2
    assert "needs exactly one host in group [slurm_controller]" in proc.stderr


def test_slurm_not_running(slurm_cluster: Sandbox, sleeper: Path) -> None:
    controller = node_container(slurm_cluster, "node1")
    docker_exec(controller, "systemctl", "stop", "slurmctld")
    try:
        proc = gp(slurm_cluster, "launch", "--scheduler", "slurm", str(sleeper))
        assert proc.returncode == 2, proc.stderr
        assert "Slurm is not running on node1" in proc.stderr
    finally:
        docker_exec(controller, "systemctl", "start", "slurmctld")
        # Back as the other tests need it: slurmctld answers and both nodes have registered again (they
        # show as "unk" until then).
        wait_until_idle(slurm_cluster)


def test_a_drained_node_makes_launch_exit_7_naming_it(
    slurm_cluster: Sandbox, sleeper: Path, tmp_path: Path
) -> None:
    controller = node_container(slurm_cluster, "node1")
    reason = "gpuprov test: a GPU fell off the bus"
    drained = docker_exec(
        controller, "scontrol", "update", "nodename=node2", "state=drain", f"reason={reason}"
    )
    assert drained.returncode == 0, drained.stderr
    try:
        # What launch reads (printed for tests/recorded/slurm/: run with -s to see it).
        shown = docker_exec(controller, "sinfo", "--noheader", "--Node", "--format", "%N|%P|%n|%o|%T|%E")
        print(f"sinfo with node2 drained:\n{shown.stdout}")
        before = slurm_queue(slurm_cluster)
        proc = gp(slurm_cluster, "launch", "--scheduler", "slurm", "--nodes", "2", str(sleeper))
        assert proc.returncode == 7, proc.stderr
        assert f"unavailable: node2 (drained: {reason})" in proc.stderr, proc.stderr
        assert "partition gpu has 1 that can take a job (node1)" in proc.stderr
        assert "Traceback" not in proc.stderr and "Pushing" not in proc.stderr
        assert slurm_queue(slurm_cluster) == before
        # A job the usable nodes can hold still runs: the drained node gets no files and is excluded.
        hello = tmp_path / "hello.py"
        hello.write_text(HELLO)
        one = gp(slurm_cluster, "launch", "--scheduler", "slurm", "--nodes", "1", str(hello))
        assert one.returncode == 0, one.stderr
        assert "hello from rank 0" in one.stdout and "on 1 host(s)" in one.stdout + one.stderr
    finally:
        docker_exec(controller, "scontrol", "update", "nodename=node2", "state=resume")
    wait_until_idle(slurm_cluster)


HELLO = "import os, socket\nprint('hello from rank', os.environ['RANK'], flush=True)\n"


@pytest.mark.parametrize("naming", ["fqdn", "address"])
def test_inventory_hosts_named_otherwise_than_slurm_nodes(
    slurm_cluster: Sandbox, tmp_path: Path, naming: str
) -> None:
    """Slurm names the nodes node1 and node2 (their short hostnames); the inventory names them by FQDN or by
    address, and launch still finds each node's host and prints its output under the inventory's name."""
    text = slurm_cluster.inventory.read_text()
    names = {}
    for node in ("node1", "node2"):
        line = next(line for line in text.splitlines() if line.startswith(f"{node} ansible_host="))
        address = line.split("ansible_host=")[1].split()[0]
        names[node] = f"{node}.cluster.test" if naming == "fqdn" else address
        renamed = line.replace(f"{node} ", f"{names[node]} ", 1)
        if naming == "address":
            renamed = renamed.replace(f" ansible_host={address}", "")
        text = text.replace(line, renamed)
    text = text.replace("[slurm_controller]\nnode1\n", f"[slurm_controller]\n{names['node1']}\n")
    inventory = slurm_cluster.inventory.parent / f"slurm-{naming}-inventory.ini"
    inventory.write_text(text)
    script = tmp_path / "hello.py"
    script.write_text(HELLO)
    proc = gp(
        slurm_cluster, "launch", "-i", str(inventory), "--scheduler", "slurm", "--nodes", "2", str(script)
    )
    assert proc.returncode == 0, proc.stderr
    assert "hello from rank 0" in proc.stdout and "hello from rank 1" in proc.stdout, proc.stdout
    for node in ("node1", "node2"):  # each node's lines under its inventory name (host/rank)
        assert f"\n{names[node]}/" in f"\n{proc.stdout}", proc.stdout
    assert_nothing_left(slurm_cluster)
