"""Every program gpuprov runs on a host, each a real file here; nothing else in gpuprov runs on hosts.

The rule for every module in this package: standard library only, Python >= 3.8 (Ubuntu 20.04's python3,
the oldest the platforms ship), and no import from gpuprov, since a host has no gpuprov installed. The
exceptions: the programs that run in the job's env may import torch (env_probe, matmul_probe,
run_torchrun, bench_node, bench_models), bench_node imports bench_models (pushed beside it), and probe and
hostprobe import sockets, whose code is put in place of that import when they are sent (`program()`).
tests/unit/test_onhost.py checks the rule on every file; ruff and mypy read them as any module.

How each reaches a host (the controller side, which reads these files as text, is named in brackets):

    agent.py, run_torchrun.py   pushed into the job's directory as files, run there (launch/flow.py)
    receive.py                  sent as the text of `python -c` on the push's channel (launch/push.py)
    probe.py + sockets.py       sent as `python -c` text, sockets' code spliced in (launch/preflight.py)
    hostprobe.py + sockets.py   sent as `python -c` text, sockets' code spliced in (check/gather.py);
    env_probe.py, matmul_probe.py    their text goes with hostprobe's request on stdin; hostprobe runs
                                each with the env's python as `python -c` (check/gather.py)
    bench_node.py, bench_models.py   copied as node.py and models.py into the job's work directory that
                                launch pushes (bench/run.py)

This module itself runs on the controller only: it finds the files and builds the text that is sent.
"""

from __future__ import annotations

import functools
import shlex
from pathlib import Path

HERE = Path(__file__).parent

# The line a host program has in place of the sockets module's code (replaced by program()).
SOCKETS_IMPORT = "from gpuprov.onhost.sockets import accept_tokens, bind_first, send_token\n"


def path(name: str) -> Path:
    """The file of the host program `name` (e.g. 'agent.py')."""
    found = HERE / name
    if not found.is_file():
        raise FileNotFoundError(f"gpuprov.onhost has no {name}")
    return found


def text(name: str) -> str:
    """The text of the host program `name`, as it is sent."""
    return path(name).read_text()


@functools.cache
def program(name: str) -> str:
    """The text of a host program with the sockets module's code in place of its SOCKETS_IMPORT line."""
    source = text(name)
    if source.count(SOCKETS_IMPORT) != 1:
        raise ValueError(f"{name} must import the host socket helpers with exactly {SOCKETS_IMPORT!r}")
    body = text("sockets.py").split("from __future__ import annotations\n", 1)[1]  # the program has its own
    return source.replace(SOCKETS_IMPORT, body, 1)


def python_command(python: str, code: str, *args: str) -> str:
    """The shell command that runs a program's text (e.g. program()'s) as `python -c` with args, quoted."""
    return " ".join(shlex.quote(part) for part in (python, "-c", code, *args))
