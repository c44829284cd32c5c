"""probe.py, the programs launch's preflight runs on the hosts, run here as preflight runs them there:
`python -c <probe.py's text> COMMAND ...` through a shell, with the host's python3 (stdlib only).

A stand-in torch package (its version file, a `_C` extension's file name, and an `__init__` that imports
or fails) takes the place of the env's torch; these tests check the probe, not torch.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuprov.launch import preflight

PYTHONS = [sys.executable] + ([p] if (p := shutil.which("python3", path="/usr/bin")) else [])


def _probe(python: str, home: Path, *args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    # No __pycache__ written into the stand-in torch: pip precompiles a real one when it installs it.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run(
        ["bash", "-c", preflight.probe_command(python, *args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def _answer(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _torch(root: Path, init: str = "from torch import version\n__version__ = version.__version__\n") -> Path:
    package = root / "torch"
    package.mkdir(parents=True)
    (package / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")
    (package / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (package / "__init__.py").write_text(init)
    return root


@pytest.mark.parametrize("python", PYTHONS)
def test_look_without_torch(python: str, tmp_path: Path) -> None:
    info = _answer(_probe(python, tmp_path, "look", path=tmp_path / "empty"))
    assert info["error"] == "ImportError: No module named 'torch'"
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
    )
    assert info["python_version"] == version.stdout.strip()


@pytest.mark.parametrize("python", PYTHONS)
def test_look_at_a_torch_without_its_compiled_core(python: str, tmp_path: Path) -> None:
    site = _torch(tmp_path / "site")
    (site / "torch" / "_C.cpython-311-x86_64-linux-gnu.so").unlink()
    info = _answer(_probe(python, tmp_path, "look", path=site))
    assert str(info["error"]).startswith("ImportError: torch is incomplete: no compiled torch/_C module")


@pytest.mark.parametrize("python", PYTHONS)
def test_import_records_the_env_and_look_trusts_it_until_the_env_changes(python: str, tmp_path: Path) -> None:
    site = _torch(tmp_path / "site")
    first = _answer(_probe(python, tmp_path, "look", path=site))
    assert (first["torch"], first["cuda"], first["nccl"], first["imported_before"]) == (
        "2.13.0+cpu",
        None,
        None,
        False,
    )
    imported = _answer(_probe(python, tmp_path, "import", path=site))
    assert imported == {"torch": "2.13.0+cpu", "cuda": None, "nccl": None}
    assert len(list((tmp_path / ".gpuprov" / "torch-import-ok").iterdir())) == 1
    assert _answer(_probe(python, tmp_path, "look", path=site))["imported_before"] is True
    # pip changing the torch package changes its directory's mtime: the import must be tried again
    (site / "torch" / "new_module.py").write_text("")
    os.utime(site / "torch", ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert _answer(_probe(python, tmp_path, "look", path=site))["imported_before"] is False


@pytest.mark.parametrize("python", PYTHONS)
def test_import_of_a_torch_that_cannot_load(python: str, tmp_path: Path) -> None:
    site = _torch(
        tmp_path / "site", init="raise ImportError('libcudart.so.12: cannot open shared object file')\n"
    )
    info = _answer(_probe(python, tmp_path, "import", path=site))
    assert info == {"error": "ImportError: libcudart.so.12: cannot open shared object file"}
    assert not (tmp_path / ".gpuprov" / "torch-import-ok").exists()  # nothing recorded


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("python", PYTHONS)
def test_listen_and_connect(python: str, tmp_path: Path) -> None:
    port = _free_port()
    command = preflight.probe_command(python, "listen", str(port), "1", "1", "10")
    with subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE, text=True) as listener:
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == f"port {port}"
        sent = _probe(python, tmp_path, "connect", "127.0.0.1", str(port), "node2-abcd", "5")
        assert sent.stdout.strip() == "ok", sent.stderr
        assert listener.stdout.read().strip() == "got node2-abcd"
        assert listener.wait(timeout=10) == 0


@pytest.mark.parametrize("python", PYTHONS)
def test_listen_takes_the_next_free_port_or_says_busy(python: str, tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        port = held.getsockname()[1]
        busy = _probe(python, tmp_path, "listen", str(port), "1", "0", "1")
        assert busy.stdout.strip() == "busy"
        if port < 65535:
            moved = _probe(python, tmp_path, "listen", str(port), "2", "0", "1")
            assert moved.stdout.strip() in (f"port {port + 1}", "busy")  # busy only if port+1 is taken too


@pytest.mark.parametrize("python", PYTHONS)
def test_connect_to_a_closed_port(python: str, tmp_path: Path) -> None:
    answer = _probe(python, tmp_path, "connect", "127.0.0.1", str(_free_port()), "t", "2").stdout.strip()
    assert answer == "error Connection refused"


def test_a_wrong_command_prints_the_usage_and_exits_2(tmp_path: Path) -> None:
    proc = _probe(sys.executable, tmp_path, "listen", "1")
    assert proc.returncode == 2 and "probe.py look" in proc.stderr
