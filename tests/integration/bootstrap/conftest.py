"""Sandboxes and helpers for `gpuprov bootstrap` tests: the real command over real SSH to sandbox nodes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import BIN, Sandbox, gpuprov, start_sandbox, unique_name

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
SMALL_PLAYBOOK = HERE / "playbooks" / "small.yml"
DRIVER = HERE / "driver.py"
# The lock: the sandbox inventory has none, so tests pass the sample inventory's with -e @FILE.
LOCK = ROOT / "inventory" / "sample" / "group_vars" / "all" / "gpu_stack.yml"
# A file the NVIDIA roles write early on a Debian-family host: its absence shows Ansible never got there.
ROLE_FILE = "/etc/apt/preferences.d/nvidia-cuda"


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str
    state_dir: Path

    def summary(self) -> dict[str, Any]:
        """summary.json of the newest run (the one this command made)."""
        return json.loads((latest_run(self.state_dir) / "summary.json").read_text())

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


def latest_run(state_dir: Path) -> Path:
    """The run directory written last. Not the greatest name: run ids of one second differ only in their
    random suffix (ansible/runs.py: new_run_id), so two runs in one second sort at random by name."""
    return max((state_dir / "runs").iterdir(), key=_written_ns)


def _written_ns(run: Path) -> int:
    summary = run / "summary.json"
    return (summary if summary.exists() else run).stat().st_mtime_ns


def command(
    sandbox: Sandbox, *args: str, playbook: Path | None = None, inventory: Path | None = None
) -> list[str]:
    """`gpuprov bootstrap INVENTORY args` (with `playbook` in place of site.yml when given)."""
    inv = str(inventory or sandbox.inventory)
    if playbook is None:
        return [str(BIN / "gpuprov"), "bootstrap", inv, *args]
    return [sys.executable, str(DRIVER), str(playbook), "bootstrap", inv, *args]


def bootstrap(
    sandbox: Sandbox,
    *args: str,
    playbook: Path | None = None,
    inventory: Path | None = None,
    timeout: float = 900,
) -> Result:
    proc = subprocess.run(
        command(sandbox, *args, playbook=playbook, inventory=inventory),
        capture_output=True,
        text=True,
        env=sandbox.env,
        timeout=timeout,
        cwd=ROOT,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, Path(sandbox.env["GPUPROV_STATE_DIR"]))


def bootstrap_interrupted(
    sandbox: Sandbox,
    *args: str,
    when: str,
    times: int = 1,
    settle_s: float = 0.0,
    playbook: Path | None = None,
    timeout: float = 900,
) -> Result:
    """Start a bootstrap, send SIGINT (as Ctrl-C does) settle_s seconds after its run log shows `when` on
    `times` lines (a result per host: one host can be a task ahead of another), and wait for it to end."""
    state_dir = Path(sandbox.env["GPUPROV_STATE_DIR"])
    before = set((state_dir / "runs").iterdir()) if (state_dir / "runs").is_dir() else set()
    proc = subprocess.Popen(
        command(sandbox, *args, playbook=playbook),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=sandbox.env,
        cwd=ROOT,
    )
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            new = set((state_dir / "runs").iterdir()) - before if (state_dir / "runs").is_dir() else set()
            logs = [run / "gpuprov.log" for run in new if (run / "gpuprov.log").is_file()]
            if any(log.read_text().count(when) >= times for log in logs):
                time.sleep(settle_s)
                proc.send_signal(signal.SIGINT)
                break
            time.sleep(0.2)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return Result(proc.returncode, stdout, stderr, state_dir)


def on_node(sandbox: Sandbox, node: str, shell: str) -> subprocess.CompletedProcess[str]:
    """A shell command inside a node's container (to look at what a run left, not through gpuprov)."""
    return subprocess.run(
        ["docker", "exec", f"gpuprov-{sandbox.name}-{node}", "sh", "-c", shell],
        capture_output=True,
        text=True,
        timeout=60,
    )


def exists_on(sandbox: Sandbox, node: str, path: str) -> bool:
    return on_node(sandbox, node, f"test -e {path}").returncode == 0


def ansible_processes(sandbox: Sandbox) -> list[str]:
    """ansible-playbook processes (main or worker) working on this sandbox's inventory."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    inventory = str(sandbox.inventory)
    return [line for line in out.splitlines() if "ansible-playbook" in line and inventory in line]


@pytest.fixture(scope="module")
def boot_mixed_sandbox(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    """debian12 + ubuntu22.04 + rocky9 (stand-ins), for bootstrap alone: other tests add repositories."""
    sandbox = start_sandbox(
        unique_name("bmix"), sandbox_env, "--nodes", "3", "--os", "debian12,ubuntu22.04,rocky9"
    )
    yield sandbox
    gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)
