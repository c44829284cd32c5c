"""The launch tests run on node1 and node2 of the Debian sandbox that `gpuprov bootstrap` made ready
(the first_bootstrap fixture: the real site.yml, so the Python env and its fact file come from the
python_env role), through an inventory of those two hosts.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, BootstrapRun, Sandbox

ENV_PATH = "/opt/gpuprov/envs/train"
FACT_FILE = "/etc/ansible/facts.d/gpuprov_python_env.fact"
REPO = Path(__file__).resolve().parents[3]


def two_node_inventory(sandbox: Sandbox) -> Path:
    """A copy of the sandbox inventory without node3 (kept fresh for the bootstrap --check test)."""
    source = Path(sandbox.inventory)
    target = source.parent / "launch" / "inventory.ini"
    target.parent.mkdir(exist_ok=True)
    lines = [line for line in source.read_text().splitlines() if not line.startswith("node3 ")]
    target.write_text("\n".join(lines) + "\n")
    group_vars = target.parent / "group_vars"
    if not group_vars.exists():
        group_vars.symlink_to(source.parent / "group_vars")
    return target


def docker_exec(container: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", container, *command], capture_output=True, text=True, timeout=60)


def job_processes(container: str, job_id: str) -> list[str]:
    """Processes on a node whose environment carries the job's id (the job's own, by construction)."""
    script = (
        f"for p in /proc/[0-9]*; do grep -qa 'GPUPROV_JOB_ID={job_id}' $p/environ 2>/dev/null && "
        "echo \"${p#/proc/} $(tr '\\0' ' ' < $p/cmdline)\"; done; true"
    )
    return [line for line in docker_exec(container, "sh", "-c", script).stdout.splitlines() if line.strip()]


def python_processes(container: str) -> list[str]:
    """Every python process of the sandbox user (a job's torchrun and ranks are among them)."""
    proc = docker_exec(container, "ps", "-u", "gpuprov", "-o", "pid=,args=")
    return [line.strip() for line in proc.stdout.splitlines() if "python" in line and "ps -u" not in line]


@pytest.fixture(scope="session")
def container_nodes(containers_sandbox: Sandbox) -> Sandbox:
    """The `--containers` sandbox's two nodes with the container_runtime role applied alone (`--tags
    container_runtime`: the engine, not the whole site.yml), once per session: the --image launch tests and
    the --push-image tests share it."""
    applied = gp(containers_sandbox, "bootstrap", str(containers_sandbox.inventory), "-e",
                 "container_runtime_enabled=true", "--tags", "container_runtime", timeout=1800)  # fmt: skip
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr
    return containers_sandbox


@pytest.fixture(scope="session")
def launch_sandbox(deb_sandbox: Sandbox, first_bootstrap: BootstrapRun) -> Sandbox:
    assert first_bootstrap.returncode == 0, f"bootstrap of the launch hosts failed:\n{first_bootstrap.stderr}"
    return Sandbox(deb_sandbox.name, two_node_inventory(deb_sandbox), deb_sandbox.env)


def launch_env(sandbox: Sandbox) -> dict[str, str]:
    return {**sandbox.env, "GPUPROV_INVENTORY": str(sandbox.inventory), "COLUMNS": "200"}


def gp(
    sandbox: Sandbox, *args: str, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real gpuprov command (not through click's test runner), as a user would."""
    return subprocess.run(
        [str(BIN / "gpuprov"), *args],
        capture_output=True,
        text=True,
        env=launch_env(sandbox),
        timeout=timeout,
        cwd=cwd or REPO,
    )


def container(sandbox: Sandbox, node: str) -> str:
    return f"gpuprov-{sandbox.name}-{node}"


__all__ = ["REPO", "container", "docker_exec", "gp", "job_processes", "launch_env", "os", "python_processes"]
