"""torchrun for a gpuprov job: `python run_torchrun.py [torchrun's arguments]`, pushed beside agent.py.

It runs torch.distributed.run's main() as `python -m torch.distributed.run` would, and then ends the process
with os._exit(): no interpreter teardown. That teardown (joining torchrun's leftover non-daemon threads,
atexit handlers, freeing torch's modules) took seconds on a loaded host after the job had ended, and a
failed job's teardown pays it twice in a row: on the host whose rank failed, then on every other host
after the agent's SIGTERM. Nothing of the job depends on it: by the time main() returns or raises,
torchrun has stopped its workers (SIGTERM to each rank, SIGKILL after its own grace period, as it does when
it gets SIGTERM itself), and its log lines are flushed below.

Exit codes are those of `python -m torch.distributed.run`: 0, the SystemExit code (argparse: 2), or 1
with the traceback on stderr for any other exception (a failed rank's ChildFailedError, a SignalException);
130 for KeyboardInterrupt.
Standard library only, apart from torch (it runs with the job's Python env on the host).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback


def exit_code(exc: SystemExit) -> int:
    """The status Python gives a SystemExit: None is 0, an int itself, anything else printed and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(f"{exc.code}\n")
    return 1


def run() -> int:
    # As with `python -m`: the job's work directory (the current one) is first on sys.path, not this
    # file's directory (the job directory, with agent.py and run.sh).
    sys.path[0] = os.getcwd()
    try:
        importlib.import_module("torch.distributed.run").main()
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
