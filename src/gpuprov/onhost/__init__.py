"""Every program gpuprov runs on a host, each a real file here; nothing else in gpuprov runs on hosts.

The rule for every module in this package: standard library only, and no import from gpuprov, since a host
has no gpuprov installed. The exceptions: the programs that run in the job's env may import torch
(env_probe, matmul_probe, probe, run_torchrun, bench_node, bench_models, allreduce), bench_node imports
bench_models (pushed beside it), and probe and hostprobe import sockets, whose code is put in place of that
import when they are sent (`program()`).

Which Python each must work with depends on who runs it and what was checked before:

- hostprobe (+ sockets) runs with the host's system Python (ansible_python_interpreter, else python3),
  which nothing has checked: on Rocky/RHEL 8 /usr/bin/python3 is 3.6. It runs on Python >= 3.8 (also
  ansible-core's floor for targets) and must *parse* and define itself on 3.6, so that an older one
  prints one line naming the interpreter and what to set (hostprobe.MIN_PYTHON) instead of a SyntaxError.
- image_load (`--push-image`'s receiving end), fetch_url (`lock resolve`'s metadata) and managed_state
  (bootstrap's drift check) run with the host's system Python too, before anything has checked it: they
  parse on 3.6 and need nothing newer.
- env_probe and matmul_probe (run by hostprobe) and probe (+ sockets, launch's preflight) run with the
  env's Python before anything has shown that env to be good (the python_env role's default env on EL8
  is 3.6): they must parse on 3.6 and run there far enough to report the Python version and a missing or
  broken torch.
  For these five files, image_load, fetch_url and managed_state: no `from __future__ import annotations` (a
  SyntaxError on 3.6) and no other 3.7+ syntax; annotations that Python evaluates (a signature's, a
  module's) use typing's Dict/List/Optional.
- agent, receive and run_torchrun run with the env's Python after launch's preflight found a working torch
  in it, and bench_node, bench_models and allreduce run under that torchrun: every torch 2.x needs Python
  >= 3.8, so 3.8 is their floor: 3.8 syntax, and nothing evaluated at run time that 3.8 lacks (no
  `tuple[...]` in a base class or a module-level expression: PEP 585 came with 3.9).

tests/unit/test_onhost.py checks these rules on every file (3.6 and 3.8 grammar, 3.7+ futures, the
builtin generics evaluated at run time); ruff and mypy read them as any module (ruff with a 3.7 target for
the five above: pyproject.toml).

How each reaches a host (the controller side, which reads these files as text, is named in brackets):

    agent.py, run_torchrun.py   pushed into the job's directory as files, run there (launch/flow.py)
    mpirun_rank.py, mpirun_standby.py   pushed beside them under --launcher mpirun (launchers/mpirun.py);
                                they parse on 3.6 like the five above (the shim sets up any job's ranks)
    receive.py                  sent as the text of `python -c` on the push's channel (launch/push.py)
    probe.py + sockets.py       sent as `python -c` text, sockets' code spliced in (launch/preflight.py)
    hostprobe.py + sockets.py   sent as `python -c` text, sockets' code spliced in (check/gather.py);
    env_probe.py, matmul_probe.py    their text goes with hostprobe's request on stdin; hostprobe runs
                                each with the env's python as `python -c` (check/gather.py)
    bench_node.py, bench_models.py   copied as node.py and models.py into the job's work directory that
                                launch pushes (bench/run.py)
    allreduce.py                check's bandwidth job, launched like any job (check/bandwidth.py)
    image_load.py               sent as `python -c` text on one channel per host, the image archive on its
                                stdin (launch/image_push.py)
    fetch_url.py                sent as `python -c` text with a URL, to one host per OS
                                (lock_commands/metadata.py)
    managed_state.py            sent as `sudo python3 -c` text over the preflight's connection: the digests
                                of what the roles' manifests name (bootstrap/drift_probe.py)

This module itself runs on the controller only: it finds the files and builds the text that is sent.
"""

from __future__ import annotations

import ast
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
    return source.replace(SOCKETS_IMPORT, _without_docstring(text("sockets.py")), 1)


def _without_docstring(source: str) -> str:
    """A module's text after its docstring (the program it is spliced into has its own)."""
    first = ast.parse(source).body[0]
    assert isinstance(first, ast.Expr) and first.end_lineno is not None, "the module starts with a docstring"
    return "".join(source.splitlines(keepends=True)[first.end_lineno :])


def python_command(python: str, code: str, *args: str) -> str:
    """The shell command that runs a program's text (e.g. program()'s) as `python -c` with args, quoted."""
    return " ".join(shlex.quote(part) for part in (python, "-c", code, *args))
