"""One 2-node sandbox for every launch test, with the Python env the python_env role makes.

`provision_python_env` is the single place that stands in for `gpuprov bootstrap` (the python_env
role): a venv at /opt/gpuprov/envs/train with torch 2.13.0 (CPU) from the sandbox mirror, and the fact
file the role records. Once bootstrap + python_env exist, replace its body with a bootstrap of the
sandbox; the tests read only the fact file and the env, as they would after a real bootstrap.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, Sandbox, gpuprov, start_sandbox, unique_name

ENV_PATH = "/opt/gpuprov/envs/train"
FACT_FILE = "/etc/ansible/facts.d/gpuprov_python_env.fact"
REPO = Path(__file__).resolve().parents[3]

_PROVISION = f"""
set -eu
if [ -f {FACT_FILE} ] && {ENV_PATH}/bin/python -c 'import torch' 2>/dev/null; then echo unchanged; exit 0; fi
python3 -m venv {ENV_PATH}
{ENV_PATH}/bin/pip install -q --disable-pip-version-check \\
  --index-url '{{{{ gpuprov_mirror_url }}}}/pypi/simple' \\
  --trusted-host '{{{{ gpuprov_mirror_url | urlsplit("hostname") }}}}' torch==2.13.0 numpy
mkdir -p /etc/ansible/facts.d
{ENV_PATH}/bin/python - > {FACT_FILE}.tmp <<'PY'
import json, sys, torch
print(json.dumps({{"manager": "pip", "path": "{ENV_PATH}", "python": sys.executable,
    "python_version": "%d.%d.%d" % sys.version_info[:3], "torch_version": torch.__version__,
    "torch_cuda": torch.version.cuda, "nccl_version": None, "spec_hash": "test-fixture"}}))
PY
mv {FACT_FILE}.tmp {FACT_FILE}
echo changed
"""


def provision_python_env(sandbox: Sandbox, limit: str = "gpu_nodes") -> None:
    """Stand-in for `gpuprov bootstrap` (python_env role): venv, torch, fact file; all nodes at once."""
    sandbox.ansible(limit, "-b", "-f", "8", "-m", "ansible.builtin.shell", "-a", _PROVISION)


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
def launch_sandbox(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    sandbox = start_sandbox(unique_name("launch"), sandbox_env, "--nodes", "2")
    try:
        provision_python_env(sandbox)
        yield sandbox
    finally:
        gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)


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
