"""Running the real `gpuprov` command and reading its one error line, for the bad-input tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.unit import in_process

BIN = Path(sys.executable).parent


def real_gpuprov(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The `gpuprov` command in its own process, with only the environment given here."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "GPUPROV_STATE_DIR": str(cwd / "state"),
        "COLUMNS": "250",
    }
    return subprocess.run(
        [str(BIN / "gpuprov"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def one_error(proc: in_process.Result | subprocess.CompletedProcess[str], code: int) -> str:
    """The one error line of a refused command (other lines are progress); its exit code is `code`."""
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    assert proc.returncode == code, proc.stderr
    return errors[0]
