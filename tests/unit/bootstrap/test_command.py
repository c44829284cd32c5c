"""`gpuprov bootstrap` on input it must refuse before reaching any host: one line, exit 2, no run directory.

Driven through main() in this process (tests/unit/in_process.py); --help and the Mitogen case (a Python
whose site hides Mitogen) start the real command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit import in_process

GPUPROV = [sys.executable, "-m", "gpuprov"]


def bootstrap(*args: str, state: Path) -> in_process.Result:
    return in_process.gpuprov("bootstrap", *args, env={"GPUPROV_STATE_DIR": str(state)})


def refused(proc: in_process.Result | subprocess.CompletedProcess[str], state: Path) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert not (state / "runs").exists()  # refused before a run began
    assert lines[0].startswith("error: ")
    return lines[0].removeprefix("error: ")


@pytest.fixture(autouse=True, scope="module")
def _ansible_display_made_outside_the_capture() -> None:
    """Ansible's first import makes its Display, which patches the sys.stdout/stderr of that moment for
    fork-safety and, when they are in_process's StringIO buffers (no .buffer), prints two lines "[WARNING]:
    failed to patch stdout/stderr" on the stderr a test reads. Made here first, outside them, it prints
    nothing there, so the one-line assertions hold for a test run alone as in the suite."""
    import ansible.utils.display  # noqa: F401


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.ini"
    path.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\nnode2 ansible_host=192.0.2.11\n")
    return path


def test_help() -> None:
    proc = subprocess.run([*GPUPROV, "bootstrap", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for option in (
        "--extra-vars",
        "--limit",
        "--tags",
        "--skip-tags",
        "--check",
        "--diff",
        "--forks",
        "--strategy",
        "--json",
    ):
        assert option in proc.stdout


def test_missing_inventory(tmp_path: Path) -> None:
    message = refused(bootstrap(str(tmp_path / "nope.ini"), state=tmp_path / "s"), tmp_path / "s")
    assert (
        message
        == f"inventory {tmp_path / 'nope.ini'} does not exist; give the path of an INI or YAML inventory"
    )


def test_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "inv.ini"
    path.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10 stray\n")
    message = refused(bootstrap(str(path), state=tmp_path / "s"), tmp_path / "s")
    assert message.startswith(f"{path} line 2 ('node1 ansible_host=192.0.2.10 stray'): ")


def test_empty_group(tmp_path: Path) -> None:
    path = tmp_path / "inv.ini"
    path.write_text("[gpu_nodes]\n")
    message = refused(bootstrap(str(path), state=tmp_path / "s"), tmp_path / "s")
    assert message == f"{path}: group [gpu_nodes] has no hosts; add the GPU servers to it"


def test_duplicate_host(tmp_path: Path) -> None:
    path = tmp_path / "inv.ini"
    path.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\nnode1 ansible_host=192.0.2.11\n")
    message = refused(bootstrap(str(path), state=tmp_path / "s"), tmp_path / "s")
    assert (
        message
        == f"{path} line 3: host node1 is listed twice in [gpu_nodes] (first on line 2); keep one entry"
    )


def test_unknown_vars_file(tmp_path: Path, inventory: Path) -> None:
    message = refused(
        bootstrap(str(inventory), "-e", "@/nonexistent/lock.yml", state=tmp_path / "s"), tmp_path / "s"
    )
    assert (
        message
        == "-e @/nonexistent/lock.yml: no such file; give the path of a YAML or JSON file of variables"
    )


def test_limit_matching_nothing(tmp_path: Path, inventory: Path) -> None:
    message = refused(bootstrap(str(inventory), "--limit", "node9", state=tmp_path / "s"), tmp_path / "s")
    assert message == f"--limit 'node9' matches no host of group [gpu_nodes] in {inventory}"


def test_forks_zero(tmp_path: Path, inventory: Path) -> None:
    message = refused(bootstrap(str(inventory), "--forks", "0", state=tmp_path / "s"), tmp_path / "s")
    assert "--forks" in message and "0" in message


def test_strategy_mitogen_without_mitogen(tmp_path: Path, inventory: Path) -> None:
    # sitecustomize hides Mitogen from gpuprov's Python, as on an install without the gpuprov[mitogen] extra.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['ansible_mitogen'] = None\n")
    env = {**os.environ, "GPUPROV_STATE_DIR": str(tmp_path / "s"), "PYTHONPATH": str(hide),
           "GPUPROV_STRATEGY": "mitogen"}  # fmt: skip
    proc = subprocess.run(
        [*GPUPROV, "bootstrap", str(inventory)], capture_output=True, text=True, env=env, timeout=120
    )
    assert refused(proc, tmp_path / "s") == (
        "--strategy mitogen: Mitogen for Ansible is not installed; "
        "pip install 'gpuprov[mitogen]' in gpuprov's Python, or use --strategy linear"
    )


def test_strategy_unknown(tmp_path: Path, inventory: Path) -> None:
    proc = bootstrap(str(inventory), "--strategy", "free", state=tmp_path / "s")
    assert proc.returncode == 2
    assert "'free' is not one of 'linear', 'mitogen'" in proc.stderr
