"""run_torchrun.py, run here as the hosts run it, against a torch.distributed.run of the test's own (a
package on PYTHONPATH with a main() that does what each test needs): the exit codes of `python -m`, and
no waiting for what Python's teardown would wait for."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gpuprov.onhost import run_torchrun

SOURCE = Path(run_torchrun.__file__)


def _run(tmp_path: Path, main_body: str, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    package = tmp_path / "lib" / "torch" / "distributed"
    package.mkdir(parents=True)
    (tmp_path / "lib" / "torch" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "run.py").write_text("import sys, threading, time\n\ndef main():\n" + main_body)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "lib")}
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(SOURCE), *args], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    return proc, time.monotonic() - began


def test_passes_the_arguments_and_exits_0(tmp_path: Path) -> None:
    body = "    print('args', sys.argv[1:], 'path0', sys.path[0])\n"
    proc, _ = _run(tmp_path, body, "--nnodes", "2", "x.py")
    assert proc.returncode == 0, proc.stderr
    # sys.path[0] is the work directory, as with `python -m torch.distributed.run`.
    assert proc.stdout.strip() == f"args ['--nnodes', '2', 'x.py'] path0 {tmp_path / 'work'}"


def test_does_not_wait_for_what_the_teardown_would(tmp_path: Path) -> None:
    """A non-daemon thread left running (Python's teardown joins it): the process ends all the same."""
    body = "    threading.Thread(target=time.sleep, args=(30,)).start()\n"
    body += "    print('done', flush=True)\n"
    proc, took = _run(tmp_path, body)
    assert proc.returncode == 0 and proc.stdout == "done\n"
    assert took < 15


def test_a_failure_exits_1_with_its_traceback(tmp_path: Path) -> None:
    body = "    threading.Thread(target=time.sleep, args=(30,)).start()\n"
    body += "    raise RuntimeError('rank 1 failed')\n"
    proc, took = _run(tmp_path, body)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "RuntimeError: rank 1 failed" in proc.stderr
    assert took < 15


def test_system_exit_codes(tmp_path: Path) -> None:
    proc, _ = _run(tmp_path, "    sys.exit(2)\n")
    assert proc.returncode == 2
    assert run_torchrun.exit_code(SystemExit(None)) == 0
    assert run_torchrun.exit_code(SystemExit(7)) == 7


def test_system_exit_with_a_message(tmp_path: Path) -> None:
    proc, _ = _run(tmp_path, "    sys.exit('bad --nnodes')\n")
    assert proc.returncode == 1 and proc.stderr == "bad --nnodes\n"
