"""`gpuprov upgrade` on a three-node Slurm cluster: the session's two-node cluster (slurm_cluster: node1 runs
slurmctld, node1 and node2 slurmd, Debian 12's real Slurm 22.05.8, bootstrapped with the sandbox lock A)
joined here by deb_sandbox's node3, bootstrapped with lock A and added by the slurm play over node1-3.

Lock B is lock A (driver 580.126.09) with driver 590.48.01 (R590 fits CUDA 12.4.1: the table's minimum is
550.54.15), which the sandbox mirror serves (sandbox/standins/catalogue.py). A driver-only change: each batch
runs the preflight, the nvidia_driver role and the reboot, not the rest of site.yml. The plan: node2 the
canary, then node3, then node1 (the Slurm controller, last). One test, the issue's done-when in order:

1. node1 drained by an administrator; a Slurm job running on node2; node3 told (gpuprov_gpu_count=8 in its
   host_vars) to have eight GPUs, so its gate fails: the rollout waits for the job, upgrades node2 after it
   ended and returns it to service, node3's gate fails, the rollout stops at the budget (exit 1), node3
   stays drained with a reason naming the failed check, node1 (a later batch) untouched.
2. The fault removed, `--resume`: while node1 is applied, a second `gpuprov upgrade` is refused (exit 4);
   then Ctrl-C (exit 130, the state kept).
3. `--resume` again: finishes without redoing node2 or node3; node1 still drained by its administrator;
   node2 and node3 in service; the job's output intact; `gpuprov check` passes with lock B on all three.

This file sorts after the other integration tests and leaves the three nodes at lock B (driver 590.48.01) in
one Slurm cluster: keep it last, or give it a sandbox of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import BIN, Sandbox, gpuprov
from tests.integration.launch.conftest import docker_exec
from tests.integration.slurm.conftest import node_container, run_slurm_play, with_slurm
from tests.integration.slurm.conftest import slurm_cluster as slurm_cluster  # the session fixture, shared

pytestmark = pytest.mark.integration

JOB_OUT = "/tmp/gpuprov-upgrade-job.out"
ADMIN_REASON = "admin: fan replaced, burn-in pending"
Done = subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def three_nodes(deb_sandbox: Sandbox, slurm_cluster: Sandbox) -> Sandbox:
    """node3 bootstrapped with lock A (the Slurm play left out: it needs every cluster host), then the slurm
    play over node1-3 adds it to the cluster node1 and node2 run."""
    inventory = with_slurm(deb_sandbox.inventory, "slurm3-inventory.ini")
    env = {**deb_sandbox.env, "GPUPROV_INVENTORY": str(inventory)}
    boot = gpuprov("bootstrap", str(inventory), "--limit", "node3", "--skip-tags", "slurm", env=env,
                   check=False, timeout=1800)  # fmt: skip
    assert boot.returncode == 0, boot.stderr
    code, output = run_slurm_play(deb_sandbox, inventory)
    assert code == 0, output
    return Sandbox(deb_sandbox.name, inventory, env)


def lock_b(sandbox: Sandbox) -> Path:
    stack = yaml.safe_load((sandbox.inventory.parent / "group_vars" / "all" / "gpu_stack.yml").read_text())
    stack["gpu_stack"].update(driver_branch="590", driver_version="590.48.01")
    path = sandbox.inventory.parent / "lock-b.yml"
    path.write_text(yaml.safe_dump(stack))
    return path


def command(sandbox: Sandbox, *args: str) -> list[str]:
    return [str(BIN / "gpuprov"), "upgrade", *args, "-i", str(sandbox.inventory), "--gate", "quick"]


def upgrade(sandbox: Sandbox, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    env = {**sandbox.env, "COLUMNS": "200"}
    return subprocess.run(command(sandbox, *args), capture_output=True, text=True, env=env, timeout=timeout)


def sinfo(sandbox: Sandbox) -> dict[str, tuple[str, str]]:
    out = docker_exec(node_container(sandbox, "node1"), "sinfo", "--noheader", "--Node", "--format=%N|%T|%E")
    return {n: (s, r) for n, s, r in (line.split("|", 2) for line in out.stdout.split("\n") if line.strip())}


def rollout(sandbox: Sandbox) -> dict[str, object]:
    root = Path(sandbox.env["GPUPROV_STATE_DIR"]) / "upgrades"
    (found,) = list(root.glob("*/rollout.json"))
    data: dict[str, object] = json.loads(found.read_text())
    return data


def upgrade_runs(sandbox: Sandbox) -> list[tuple[str, object]]:
    """The --limit and --tags of every upgrade run recorded, oldest first."""
    runs = sorted((Path(sandbox.env["GPUPROV_STATE_DIR"]) / "runs").iterdir())
    found = [json.loads((p / "summary.json").read_text()) for p in runs if (p / "summary.json").exists()]
    return [(s["limit"], s.get("tags")) for s in found if s.get("verb") == "upgrade"]


def phase(sandbox: Sandbox, host: str) -> str | None:
    try:
        return str(rollout(sandbox)["hosts"][host]["phase"])  # type: ignore[index]
    except (ValueError, OSError):  # the state is being replaced: read it again
        return None


def second_and_ctrl_c(sandbox: Sandbox, lock: Path, host: str) -> tuple[Done, Done]:
    """`--resume`, and while it applies `host`: a second upgrade of the same inventory, then Ctrl-C."""
    args = command(sandbox, str(lock), "--resume")
    proc = subprocess.Popen(args, env={**sandbox.env, "COLUMNS": "200"}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline, second = time.monotonic() + 900, None
    while time.monotonic() < deadline and proc.poll() is None:
        if phase(sandbox, host) == "applying":
            second = upgrade(sandbox, str(lock), "--resume", timeout=120)
            time.sleep(3)  # Ansible is running on the host
            os.kill(proc.pid, signal.SIGINT)
            break
        time.sleep(0.5)
    out, err = proc.communicate(timeout=300)
    assert second is not None, f"{host} was never applied:\n{err}"
    return subprocess.CompletedProcess(args, proc.returncode, out, err), second


def test_rolling_upgrade_of_three_nodes_with_a_job_an_admin_drain_a_failed_gate_and_ctrl_c(
    three_nodes: Sandbox,
) -> None:
    sandbox, controller = three_nodes, node_container(three_nodes, "node1")
    new_lock = lock_b(sandbox)
    fault = sandbox.inventory.parent / "host_vars" / "node3.yml"
    fault.parent.mkdir(exist_ok=True)
    assert not fault.exists(), "the sandbox already has host_vars for node3: put the fault elsewhere"
    fault.write_text("gpuprov_gpu_count: 8\n")  # node3's gate fails
    docker_exec(controller, "scontrol", "update", "NodeName=node1", "State=DRAIN", f"Reason={ADMIN_REASON}")

    plan = upgrade(sandbox, str(new_lock), "--dry-run")
    print(plan.stderr)  # shown with -s: docs/upgrade.md quotes these outputs
    assert plan.returncode == 0, plan.stderr
    assert "590.48.01" in plan.stderr
    # A driver change: each batch applies the driver's role alone.
    lines = plan.stderr.splitlines()
    applies = [line.split("applies: ", 1)[1].strip() for line in lines if "applies: " in line]
    assert applies == ["preflight, nvidia_driver"] * 3, plan.stderr

    job = docker_exec(controller, "sbatch", "--parsable", "-w", "node2", "-o", "/dev/null",
                      "--wrap", f"sleep 90; echo finished > {JOB_OUT}")  # fmt: skip
    assert job.returncode == 0, job.stderr
    deadline = time.monotonic() + 60  # running (not pending) before the rollout starts
    while (
        "RUNNING" not in docker_exec(controller, "squeue", "-h", "-j", job.stdout.strip(), "-o", "%T").stdout
    ):
        assert time.monotonic() < deadline, "the job did not start on node2"
        time.sleep(1)

    first = upgrade(sandbox, str(new_lock))
    print(first.stderr)
    assert first.returncode == 1, first.stderr
    assert "Waiting for jobs to end" in first.stderr and f"Slurm job {job.stdout.strip()}" in first.stderr
    assert docker_exec(node_container(sandbox, "node2"), "cat", JOB_OUT).stdout.strip() == "finished"
    states = sinfo(sandbox)
    assert states["node2"][0] == "idle"  # the canary passed: back in service
    # gpuprov_gpu_count makes check treat node3 as a GPU host: the GPU checks fail, gpu-count among them.
    assert states["node3"][0] == "drained" and "failed: gate: " in states["node3"][1]
    assert "gpu-count" in states["node3"][1]
    assert states["node1"] == ("drained", ADMIN_REASON)
    # node1's batch never started; each run applied the driver's role alone (and the preflight, the reboot).
    assert upgrade_runs(sandbox) == [("node2", ["nvidia_driver"]), ("node3", ["nvidia_driver"])]

    fault.unlink()
    stopped, second = second_and_ctrl_c(sandbox, new_lock, "node1")
    assert second.returncode == 4, second.stderr  # one rollout of an inventory at a time
    assert "another gpuprov upgrade of" in second.stderr
    assert stopped.returncode == 130, stopped.stderr
    assert "--resume" in stopped.stderr.splitlines()[-1]
    assert phase(sandbox, "node2") == "done" and phase(sandbox, "node3") == "done"

    done = upgrade(sandbox, str(new_lock), "--resume")
    print(stopped.stderr, done.stderr)
    assert done.returncode == 0, done.stderr
    # node2 and node3 not redone after Ctrl-C: node3 twice (its gate failed), node1 twice (interrupted).
    assert [limit for limit, _ in upgrade_runs(sandbox)] == ["node2", "node3", "node3", "node1", "node1"]
    states = sinfo(sandbox)
    assert states["node1"] == ("drained", ADMIN_REASON)  # the administrator's drain stays
    assert states["node2"][0] == "idle" and states["node3"][0] == "idle"
    check = subprocess.run(
        [str(BIN / "gpuprov"), "check", str(sandbox.inventory), "--quick", "-e", f"@{new_lock}", "--json"],
        capture_output=True, text=True, env=sandbox.env, timeout=300,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    docker_exec(controller, "scontrol", "update", "NodeName=node1", "State=RESUME")
