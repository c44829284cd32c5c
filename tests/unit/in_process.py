"""Run `gpuprov.cli.main(argv)` in the test's own process, as the `gpuprov` command runs it in its own.

Starting the real command costs about half a CPU-second (Python, click, rich, then what the command
imports), and most bad-input tests check what main() makes of the arguments and files: the exit code it
gives sys.exit and the lines it writes on stdout and stderr, which are the same here. An exception that
main() lets through (a traceback for a user) fails the test here as the traceback would there. Tests in
tests/unit/test_cli.py and a few in tests/unit/bad_input/ still start the real command, to prove the entry
point end to end (exit codes, one error line, no traceback).
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuprov import cli, console


@dataclass(frozen=True)
class Result:
    """What the tests read of a subprocess.CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def gpuprov(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Result:
    """`gpuprov ARGS...` run by main(), in CWD, with ENV added to the environment (GPUPROV_* variables of
    the test's own environment are left out, as a command started with only ENV would not see them)."""
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("GPUPROV_")]:
            patch.delenv(name)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        if cwd is not None:
            patch.chdir(cwd)
        console.set_verbosity(console.Verbosity.NORMAL)  # -q / -v of an earlier call are process state
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                cli.main(list(args))
        except SystemExit as exc:
            code = exc.code
        finally:
            console.set_verbosity(console.Verbosity.NORMAL)
    assert isinstance(code, int), f"main() exits with a number, not {code!r}"
    return Result(int(code), out.getvalue(), err.getvalue())
