"""`gpuprov upgrade` on the session's two-node Slurm cluster (slurm_cluster: node1 runs slurmctld, both run
slurmd, Debian 12's real Slurm 22.05.8; bootstrapped with the sandbox lock A).

Lock B is lock A (driver 580.126.09) with driver 590.48.01 (R590 fits CUDA 12.4.1: the table's minimum is
550.54.15), which the sandbox mirror serves (sandbox/standins/catalogue.py): a driver-only change keeps the
batches short. One test, the issue's done-when in order, on the cluster the other Slurm tests already made:

1. node1 drained by an administrator; a Slurm job running on node2; node2 told (gpuprov_gpu_count=8 in its
   host_vars) to have eight GPUs, so its gate fails: the rollout waits for the job, upgrades node2 after it
   ended, the gate fails, the rollout stops at the budget (exit 1), node2 stays drained with a reason naming
   the failed check, node1 (a later batch) untouched.
2. The fault removed, `--resume`: Ctrl-C while node1 is applied (exit 130, the state kept).
3. `--resume` again: finishes without redoing node2; node1 still drained by its administrator; node2 back
   in service; the job's output intact; `gpuprov check` passes with lock B's driver on both nodes.

This file sorts after the other integration tests and leaves the two nodes at lock B (driver 590.48.01):
keep it last, or give it a sandbox of its own.
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

from tests.integration.conftest import BIN, Sandbox
from tests.integration.launch.conftest import docker_exec
from tests.integration.slurm.conftest import node_container
from tests.integration.slurm.conftest import slurm_cluster as slurm_cluster  # the session fixture, shared

pytestmark = pytest.mark.integration

JOB_OUT = "/tmp/gpuprov-upgrade-job.out"
ADMIN_REASON = "admin: fan replaced, burn-in pending"


def lock_b(sandbox: Sandbox) -> Path:
    stack = yaml.safe_load((sandbox.inventory.parent / "group_vars" / "all" / "gpu_stack.yml").read_text())
    stack["gpu_stack"].update(driver_branch="590", driver_version="590.48.01")
    path = sandbox.inventory.parent / "lock-b.yml"
    path.write_text(yaml.safe_dump(stack))
    return path


def upgrade(sandbox: Sandbox, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "gpuprov"), "upgrade", *args, "-i", str(sandbox.inventory), "--gate", "quick"]
    env = {**sandbox.env, "COLUMNS": "200"}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def sinfo(sandbox: Sandbox) -> dict[str, tuple[str, str]]:
    out = docker_exec(node_container(sandbox, "node1"), "sinfo", "--noheader", "--Node", "--format=%N|%T|%E")
    return {n: (s, r) for n, s, r in (line.split("|", 2) for line in out.stdout.split("\n") if line.strip())}


def rollout(sandbox: Sandbox) -> dict[str, object]:
    root = Path(sandbox.env["GPUPROV_STATE_DIR"]) / "upgrades"
    (found,) = list(root.glob("*/rollout.json"))
    data: dict[str, object] = json.loads(found.read_text())
    return data


def upgrade_runs(sandbox: Sandbox) -> list[str]:
    """The --limit of every upgrade run recorded, oldest first."""
    runs = sorted((Path(sandbox.env["GPUPROV_STATE_DIR"]) / "runs").iterdir())
    found = [json.loads((p / "summary.json").read_text()) for p in runs if (p / "summary.json").exists()]
    return [s["limit"] for s in found if s.get("verb") == "upgrade"]


def interrupt_when_applying(sandbox: Sandbox, args: list[str], host: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "gpuprov"), "upgrade", *args, "-i", str(sandbox.inventory), "--gate", "quick"]
    proc = subprocess.Popen(command, env={**sandbox.env, "COLUMNS": "200"}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if rollout(sandbox)["hosts"][host]["phase"] == "applying":  # type: ignore[index]
                time.sleep(5)  # Ansible is running on the host
                os.kill(proc.pid, signal.SIGINT)
                break
        except (ValueError, OSError):  # the state is being replaced: read it again
            pass
        time.sleep(0.5)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def test_rolling_upgrade_with_a_job_an_admin_drain_a_failed_gate_and_ctrl_c(slurm_cluster: Sandbox) -> None:
    sandbox, controller = slurm_cluster, node_container(slurm_cluster, "node1")
    new_lock = lock_b(sandbox)
    host_vars = sandbox.inventory.parent / "host_vars"
    host_vars.mkdir(exist_ok=True)
    (host_vars / "node2.yml").write_text("gpuprov_gpu_count: 8\n")  # the fault: node2's gate fails
    docker_exec(controller, "scontrol", "update", "NodeName=node1", "State=DRAIN", f"Reason={ADMIN_REASON}")
    job = docker_exec(controller, "sbatch", "--parsable", "-w", "node2", "-o", "/dev/null",
                      "--wrap", f"sleep 90; echo finished > {JOB_OUT}")  # fmt: skip
    assert job.returncode == 0, job.stderr
    deadline = time.monotonic() + 60  # running (not pending) before the rollout starts
    while (
        "RUNNING" not in docker_exec(controller, "squeue", "-h", "-j", job.stdout.strip(), "-o", "%T").stdout
    ):
        assert time.monotonic() < deadline, "the job did not start on node2"
        time.sleep(1)

    plan = upgrade(sandbox, str(new_lock), "--dry-run")
    print(plan.stderr)  # shown with -s: docs/upgrade.md quotes these outputs
    assert plan.returncode == 0, plan.stderr
    assert "canary" in plan.stderr and "590.48.01" in plan.stderr

    first = upgrade(sandbox, str(new_lock))
    print(first.stderr)
    assert first.returncode == 1, first.stderr
    assert "Waiting for jobs to end" in first.stderr and f"Slurm job {job.stdout.strip()}" in first.stderr
    assert docker_exec(node_container(sandbox, "node2"), "cat", JOB_OUT).stdout.strip() == "finished"
    states = sinfo(sandbox)
    # gpuprov_gpu_count makes check treat node2 as a GPU host: the GPU checks fail, gpu-count among them.
    assert states["node2"][0] == "drained" and "failed: gate: " in states["node2"][1]
    assert "gpu-count" in states["node2"][1]
    assert states["node1"] == ("drained", ADMIN_REASON)
    assert upgrade_runs(sandbox) == ["node2"]  # node1's batch never started

    (host_vars / "node2.yml").unlink()
    stopped = interrupt_when_applying(sandbox, [str(new_lock), "--resume"], "node1")
    assert stopped.returncode == 130, stopped.stderr
    assert "--resume" in stopped.stderr.splitlines()[-1]
    assert rollout(sandbox)["hosts"]["node2"]["phase"] == "done"  # type: ignore[index]

    done = upgrade(sandbox, str(new_lock), "--resume")
    print(stopped.stderr, done.stderr)
    assert done.returncode == 0, done.stderr
    assert upgrade_runs(sandbox) == ["node2", "node2", "node1", "node1"]  # node2 not redone after Ctrl-C
    states = sinfo(sandbox)
    assert states["node1"] == ("drained", ADMIN_REASON)  # the administrator's drain stays
    assert states["node2"][0] == "idle"
    check = subprocess.run(
        [str(BIN / "gpuprov"), "check", str(sandbox.inventory), "--quick", "-e", f"@{new_lock}", "--json"],
        capture_output=True, text=True, env=sandbox.env, timeout=300,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    docker_exec(controller, "scontrol", "update", "NodeName=node1", "State=RESUME")
