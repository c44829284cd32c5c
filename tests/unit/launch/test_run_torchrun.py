"""run_torchrun.py, run here as the hosts run it, against a torch.distributed.run of the test's own (a
package on PYTHONPATH with a main() that does what each test needs): the exit codes of `python -m`, no
waiting for what Python's teardown would wait for, and a node other than the master waiting for the
master's port before main().

The stand-in's get_args_parser() has the options of torch 2.13's torch/distributed/run.py that the wait
reads, with their names, aliases and defaults there (--rdzv-backend default "static", --rdzv-endpoint
default "", --standalone, --node-rank, --master-addr, --master-port, the script and REMAINDER
arguments), and its get_rdzv_endpoint() and torch/distributed/elastic/rendezvous/utils.py's
parse_rendezvous_endpoint() do what torch 2.13's do for host:port endpoints (the endpoint, else
master_addr:master_port; split at the last colon, -1 without a port); the sandbox's nodes run the real
ones (tests/integration/launch)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpuprov.onhost import run_torchrun

SOURCE = Path(run_torchrun.__file__)


PARSER = """
from argparse import REMAINDER, ArgumentParser

def get_args_parser():
    parser = ArgumentParser()
    parser.add_argument("--nnodes", default="1:1")
    parser.add_argument("--rdzv-backend", "--rdzv_backend", default="static")
    parser.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default="")
    parser.add_argument("--standalone", action="store_true")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0)
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    parser.add_argument("--master-port", "--master_port", type=int, default=29500)
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=REMAINDER)
    return parser

def get_rdzv_endpoint(args):
    if args.rdzv_backend == "static" and not args.rdzv_endpoint:
        return f"{args.master_addr}:{args.master_port}"
    return args.rdzv_endpoint
"""
ENDPOINT = """
def parse_rendezvous_endpoint(endpoint, default_port):
    host, *rest = endpoint.strip().rsplit(":", 1)
    return host, int(rest[0]) if rest else default_port
"""


def _run(
    tmp_path: Path, main_body: str, *args: str, parser: bool = False
) -> tuple[subprocess.CompletedProcess[str], float]:
    package = tmp_path / "lib" / "torch" / "distributed"
    package.mkdir(parents=True)
    (tmp_path / "lib" / "torch" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    text = "import sys, threading, time\n\ndef main():\n" + main_body + (PARSER if parser else "")
    (package / "run.py").write_text(text)
    rendezvous = package / "elastic" / "rendezvous"
    rendezvous.mkdir(parents=True)
    for folder in (package / "elastic", rendezvous):
        (folder / "__init__.py").write_text("")
    (rendezvous / "utils.py").write_text(ENDPOINT)
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


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    return server


def test_a_node_other_than_the_master_starts_torchrun_once_the_master_listens(tmp_path: Path) -> None:
    server = _listener()
    port = server.getsockname()[1]
    threading.Timer(1.0, server.listen).start()  # the master's torchrun, still importing torch
    body = "    print('main', time.monotonic(), flush=True)\n"
    args = ("--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port", str(port))
    proc, took = _run(tmp_path, body, *args, "train.py", "--epochs", "1", parser=True)
    server.close()
    assert proc.returncode == 0, proc.stderr
    assert 1.0 <= took < 15  # main() came after the port opened, not before


def test_a_rendezvous_endpoint_is_waited_for_in_place_of_master_addr_and_port(tmp_path: Path) -> None:
    """torchrun's static rendezvous uses --rdzv-endpoint when given (get_rdzv_endpoint); so does the wait:
    --master-addr/--master-port (left at torchrun's defaults here) would name a port nobody opens."""
    server = _listener()
    port = server.getsockname()[1]
    threading.Timer(1.0, server.listen).start()
    args = ("--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", f"127.0.0.1:{port}")
    proc, took = _run(tmp_path, "    print('main')\n", *args, "train.py", parser=True)
    server.close()
    assert proc.returncode == 0 and proc.stdout == "main\n", proc.stderr
    assert 1.0 <= took < 15


def test_a_wait_that_goes_wrong_leaves_it_to_torchrun(tmp_path: Path) -> None:
    """The wait is only a head start: a name that does not resolve ends it at once, and torchrun's
    main() runs and reports as it would have."""
    args = ("--node-rank", "1", "--master-addr", "no-such-host.invalid", "--master-port", "29500")
    proc, took = _run(tmp_path, "    print('main')\n", *args, "train.py", parser=True)
    assert proc.returncode == 0 and proc.stdout == "main\n", proc.stderr
    assert took < 15


def test_the_master_and_a_standalone_or_c10d_node_do_not_wait(tmp_path: Path) -> None:
    server = _listener()  # bound, never listening: a node that waited would wait MASTER_WAIT_S
    port = str(server.getsockname()[1])
    cases = [
        ("--node-rank", "0", "--master-port", port),
        ("--standalone", "--node-rank", "1", "--master-port", port),
        ("--rdzv-backend", "c10d", "--node-rank", "1", "--master-port", port),
    ]
    for number, args in enumerate(cases):
        proc, took = _run(tmp_path / str(number), "    print('main')\n", *args, "train.py", parser=True)
        assert proc.returncode == 0 and proc.stdout == "main\n", proc.stderr
        assert took < 15
    server.close()


def test_arguments_torchrun_refuses_are_left_to_it(tmp_path: Path) -> None:
    body = "    sys.exit('torchrun: error: bad arguments')\n"
    proc, _ = _run(tmp_path, body, "--node-rank", "x", "train.py", parser=True)
    assert proc.returncode == 1 and proc.stderr == "torchrun: error: bad arguments\n"


def test_the_wait_ends_at_its_limit() -> None:
    server = _listener()
    began = time.monotonic()
    assert not run_torchrun.wait_for_master(server.getsockname(), limit_s=0.3)
    assert 0.3 <= time.monotonic() - began < 5
    server.close()
