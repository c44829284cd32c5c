"""torchrun for a gpuprov job: `python run_torchrun.py [torchrun's arguments]`, pushed beside agent.py.

It runs torch.distributed.run's main() as `python -m torch.distributed.run` would, and then ends the process
with os._exit(): no interpreter teardown. That teardown (joining torchrun's leftover non-daemon threads,
atexit handlers, freeing torch's modules) took seconds on a loaded host after the job had ended, and a
failed job's teardown pays it twice in a row: on the host whose rank failed, then on every other host
after the agent's SIGTERM. Nothing of the job depends on it: by the time main() returns or raises,
torchrun has stopped its workers (SIGTERM to each rank, SIGKILL after its own grace period, as it does when
it gets SIGTERM itself), and its log lines are flushed below.

On a node other than the master (static rendezvous, torchrun's default), main() is called only once the
rendezvous endpoint (the master's) accepts a TCP connection, or after MASTER_WAIT_S: torchrun's own
client, when refused because the master's torchrun is still importing torch, retries only after a
back-off (c10d's ExponentialBackoffWithJitter, 500 ms at first), and a job whose nodes all start at once
(as gpuprov starts them) then paid about half a second before every first line in about half the 2-node
sandbox runs. The test connection is opened and closed before the store is used: TCPStore's server takes
it as a client that came and went (logged at DEBUG only) and counts its workers by a key, not by
connections. Anything that goes wrong in the wait leaves it to torchrun (docs/launch.md, "How a launch is
put together").

Exit codes are those of `python -m torch.distributed.run`: 0, the SystemExit code (argparse: 2), or 1
with the traceback on stderr for any other exception (a failed rank's ChildFailedError, a SignalException);
130 for KeyboardInterrupt.
Standard library only, apart from torch (it runs with the job's Python env on the host).
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
import time
import traceback
from typing import Any, NoReturn


def exit_code(exc: SystemExit) -> int:
    """The status Python gives a SystemExit: None is 0, an int itself, anything else printed and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(f"{exc.code}\n")
    return 1


MASTER_WAIT_S = 60.0  # then torchrun's own connect (and its timeout) takes over
MASTER_POLL_S = 0.02
CONNECT_TIMEOUT_S = 0.5  # per address and try: a blackholed address must not slow the polling down


def master_to_wait_for(run_module: Any, argv: list[str]) -> tuple[str, int] | None:
    """The rendezvous endpoint when this node should wait for it: a static rendezvous (no --rdzv-backend,
    or static), not --standalone, --node-rank other than 0. Read with torchrun's own parser (its errors
    and --help are left to main()), the endpoint as its static rendezvous reads it: get_rdzv_endpoint
    (--rdzv-endpoint, else --master-addr:--master-port) split by parse_rendezvous_endpoint."""
    get_args_parser = getattr(run_module, "get_args_parser", None)  # torch 1.10+
    get_endpoint = getattr(run_module, "get_rdzv_endpoint", None)
    if get_args_parser is None or get_endpoint is None or "-h" in argv or "--help" in argv:
        return None
    parser = get_args_parser()

    def refuse(message: str) -> NoReturn:
        raise ValueError(message)

    parser.error = refuse  # main() reports bad arguments, once
    try:
        args = parser.parse_args(argv)
    except (ValueError, SystemExit):
        return None
    if args.standalone or args.rdzv_backend != "static" or int(args.node_rank) == 0:
        return None
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint  # type: ignore[import-not-found]

    host, port = parse_rendezvous_endpoint(get_endpoint(args), -1)
    return (str(host), int(port)) if port > 0 else None


def wait_for_master(address: tuple[str, int], limit_s: float = MASTER_WAIT_S) -> bool:
    """Until a TCP connection to address (its name resolved once) is accepted (True), or limit_s has
    passed or the name does not resolve (False)."""
    deadline = time.monotonic() + limit_s
    try:
        targets = socket.getaddrinfo(*address, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    while True:
        for family, kind, proto, _, sockaddr in targets:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(CONNECT_TIMEOUT_S)
                try:
                    sock.connect(sockaddr)
                    return True
                except OSError:
                    pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(MASTER_POLL_S)


def run() -> int:
    # As with `python -m`: the job's work directory (the current one) is first on sys.path, not this
    # file's directory (the job directory, with agent.py and run.sh).
    sys.path[0] = os.getcwd()
    try:
        run_module = importlib.import_module("torch.distributed.run")
        try:
            master = master_to_wait_for(run_module, sys.argv[1:])
            if master is not None:
                wait_for_master(master)
        except Exception:  # only ever a head start: torchrun's own connect does the rest
            pass
        run_module.main()
    except SystemExit as exc:
        return exit_code(exc)
    except KeyboardInterrupt:  # `python -m` would end by SIGINT: the shell's 130
        traceback.print_exc()
        return 130
    except BaseException:  # what `python -m` prints before it exits 1
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    code = run()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
