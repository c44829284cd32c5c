"""Fixtures that start real sandboxes: containers with systemd and sshd, reached by real Ansible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Sandbox:
    name: str
    inventory: Path
    env: dict[str, str]

    def gpuprov(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        return gpuprov(*args, "--name", self.name, env=self.env, check=check, timeout=timeout)

    def ansible(
        self, *args: str, check: bool = True, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        return run_ansible("ansible", "-i", str(self.inventory), *args, env=env, check=check)

    def playbook(self, playbook: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_ansible(
            "ansible-playbook", "-i", str(self.inventory), str(playbook), *args, env=self.env, check=check
        )

    def containers(self) -> list[str]:
        return labelled_containers(self.name)


def gpuprov(
    *args: str, env: dict[str, str], check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(BIN / "gpuprov"), *args], capture_output=True, text=True, env=env, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"gpuprov {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def run_ansible(
    tool: str, *args: str, env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    # Host key checking on, as for a user; no stray config from the machine or repository.
    full_env = {**env, "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([str(BIN / tool), *args], capture_output=True, text=True, env=full_env, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{tool} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def labelled_containers(sandbox: str) -> list[str]:
    return _docker_ids("ps", "-aq", "--filter", f"label=gpuprov.sandbox={sandbox}")


def labelled_networks(sandbox: str) -> list[str]:
    return _docker_ids("network", "ls", "-q", "--filter", f"label=gpuprov.sandbox={sandbox}")


def labelled_volumes(sandbox: str) -> list[str]:
    return _docker_ids("volume", "ls", "-q", "--filter", f"label=gpuprov.sandbox={sandbox}")


def _docker_ids(*args: str) -> list[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.split()


def unique_name(prefix: str) -> str:
    return f"t{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpuprov-state")


@pytest.fixture(scope="session")
def sandbox_env(state_dir: Path) -> dict[str, str]:
    # Images and the mirror are cached in the normal cache dir, shared with the demo; sandboxes' own
    # files go to a temporary state dir so the tests never touch a user's sandboxes.
    # Tests that run ansible/ansible-playbook themselves read no ansible.cfg (the checkout's one would
    # share its fact cache between sandboxes, whose hosts have the same names), and facts are not
    # injected as variables, as in gpuprov's own runs: roles read ansible_facts['...'].
    empty_config = state_dir / "ansible.cfg"
    empty_config.write_text("")
    return {
        **os.environ,
        "GPUPROV_STATE_DIR": str(state_dir),
        "ANSIBLE_CONFIG": str(empty_config),
        "ANSIBLE_INJECT_FACT_VARS": "False",
    }


def start_sandbox(name: str, env: dict[str, str], *args: str) -> Sandbox:
    gpuprov("sandbox", "up", "--name", name, *args, env=env)
    inventory = Path(gpuprov("sandbox", "inventory", "--name", name, env=env).stdout.strip())
    return Sandbox(name, inventory, env)


@pytest.fixture(scope="session")
def mixed_sandbox(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    """One node of each supported OS: debian12, ubuntu22.04 (stand-in), rocky9 (stand-in)."""
    sandbox = start_sandbox(
        unique_name("mixed"), sandbox_env, "--nodes", "3", "--os", "debian12,ubuntu22.04,rocky9"
    )
    yield sandbox
    gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)


def facts(sandbox: Sandbox, host: str) -> dict[str, object]:
    proc = sandbox.ansible(
        host, "-m", "ansible.builtin.setup", "-a", "gather_subset=!all,!min,distribution,pkg_mgr"
    )
    payload = proc.stdout.split("=>", 1)[1]
    found: dict[str, object] = json.loads(payload)["ansible_facts"]
    return found


@pytest.fixture(scope="session")
def deb_sandbox(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    """Three Debian 12 nodes: node1 and node2 get bootstrapped (first_bootstrap), node3 stays fresh."""
    sandbox = start_sandbox(unique_name("boot"), sandbox_env, "--nodes", "3", "--os", "debian12")
    yield sandbox
    gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)


@dataclass(frozen=True)
class BootstrapRun:
    returncode: int
    stdout: str
    stderr: str
    summary: dict[str, object]


@pytest.fixture(scope="session")
def first_bootstrap(deb_sandbox: Sandbox) -> BootstrapRun:
    """`gpuprov bootstrap --limit node1,node2` with the real site.yml, once per session: the bootstrap
    tests check it, and the launch tests run their jobs on the hosts it made ready."""
    proc = gpuprov("bootstrap", str(deb_sandbox.inventory), "--limit", "node1,node2", env=deb_sandbox.env,
                   check=False, timeout=1800)  # fmt: skip
    # The run written last (run ids of one second sort at random by name: ansible/runs.py new_run_id).
    runs = (Path(deb_sandbox.env["GPUPROV_STATE_DIR"]) / "runs").iterdir()
    newest = max(runs, key=lambda run: run.stat().st_mtime_ns)
    summary = json.loads((newest / "summary.json").read_text())
    return BootstrapRun(proc.returncode, proc.stdout, proc.stderr, summary)


@pytest.fixture(scope="session")
def containers_sandbox(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    """Two Debian 12 nodes with `--containers`: the TLS registry they trust and the PyTorch image pushed
    there, named by digest in the inventory's gpuprov_sandbox_image (built once per machine, then cached)."""
    sandbox = start_sandbox(unique_name("ctr"), sandbox_env, "--nodes", "2", "--containers")
    yield sandbox
    gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)
