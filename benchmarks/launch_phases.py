"""Where one `gpuprov launch` spends its time on the controller: wall and CPU seconds per phase.

    GPUPROV_STATE_DIR=... GPUPROV_INVENTORY=... .venv/bin/python benchmarks/launch_phases.py \
        [--nodes 2] [--repeat 3] [--profile N] SCRIPT

Runs `gpuprov launch --nodes N SCRIPT` in this process (as the `gpuprov` command does: gpuprov.cli.main),
once per repetition in a fresh Python each, and marks the moments the phases end by wrapping the functions
that end them: imports (gpuprov.cli and the launch command), inventory (inventory_cache.load: from the
cache gpuprov keeps in the state dir from the second repetition on, as for a user's second launch of an
unchanged inventory), the connects started (connect_ahead.Ahead.start), launch's own modules imported (where
OverSsh.launch imports them, while the hosts connect), each host's SSH connection (ssh.connect, in
connect_ahead's threads), preflight (preflight.run), plan (the scripts rendered), push (every host has its
files), start (each host's agent started), first line (the first line of every host's rank). CPU is this
process's (all its threads: paramiko's transport threads do the key exchange and the ciphers), from
time.process_time(); the interpreter's own start (`python -c pass`) is measured apart and printed.
SCRIPT should print one line per rank at once (benchmarks/launch.py's first_line.py does). With
--profile N, cProfile's top N functions (cumulative, main thread only) of one more run follow.
Prints the median of each phase's wall and CPU seconds over the repetitions, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

# Measured before anything else is imported: the phases start here.
BEGAN = time.monotonic()
BEGAN_CPU = time.process_time()


def one_run(nodes: int, script: str, profile: int) -> None:
    """Child: run the launch once, print the phases as one JSON line (and cProfile's table if asked)."""
    marks: list[tuple[str, float, float]] = []

    def mark(name: str) -> None:
        marks.append((name, time.monotonic() - BEGAN, time.process_time() - BEGAN_CPU))

    from gpuprov import cli, inventory_cache, ssh
    from gpuprov.launch import connect_ahead
    from gpuprov.launch.schedulers import over_ssh

    mark("imports (cli)")

    def wrap(owner: object, attr: str, name: str, before: str | None = None) -> None:
        original = getattr(owner, attr)

        def wrapper(*args: object, **kwargs: object) -> object:
            if before:
                mark(before)
            value = original(*args, **kwargs)
            mark(name)
            return value

        setattr(owner, attr, wrapper)

    wrap(inventory_cache, "load", "inventory loaded")
    wrap(connect_ahead.Ahead, "start", "connects started (ahead)")
    wrap(ssh, "connect", "an SSH connection open")
    # launch's own modules load where `gpuprov launch` loads them (OverSsh.launch), while the hosts connect.
    launch = over_ssh.OverSsh.launch

    def launching(self: over_ssh.OverSsh, *args: Any) -> str:
        from gpuprov.launch import attached, flow, preflight, stream

        mark("launch's modules imported")
        wrap(flow, "plan", "plan (scripts rendered)", before="plan begins")
        wrap(preflight, "run", "preflight done")
        wrap(flow, "_push_all", "push done (every host has its files)")
        wrap(attached.AttachedJob, "start", "an agent started")
        line = stream.Printer.line

        def first_lines(printer: stream.Printer, host: str, text: str) -> None:
            line(printer, host, text)
            if "first line of rank" in text and host not in seen:
                seen.add(host)
                mark("a host's first line")

        stream.Printer.line = first_lines  # type: ignore[method-assign,assignment]
        return launch(self, *args)

    over_ssh.OverSsh.launch = launching  # type: ignore[method-assign,assignment]
    seen: set[str] = set()
    argv = ["--quiet", "launch", "--nodes", str(nodes), script]
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        cli.main(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        if profiler is not None:
            profiler.disable()
    mark("exited")
    print("PHASES " + json.dumps(marks), flush=True)
    if profiler is not None:
        import pstats

        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(profile)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("script")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="cProfile's top N of one more run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        one_run(args.nodes, args.script, args.profile)
        return 0
    command = [sys.executable, __file__, "--child", "--nodes", str(args.nodes), args.script]
    bare = [sys.executable, "-c", "pass"]
    load_before = os.getloadavg()
    runs: list[dict[str, tuple[float, float]]] = []  # "phase #k" -> (wall, CPU) at its end
    starts = []
    for _ in range(args.repeat):
        t = time.monotonic()
        subprocess.run(bare, check=True)
        starts.append(time.monotonic() - t)
        out = subprocess.run(command, capture_output=True, text=True)
        phases = [line for line in out.stdout.splitlines() if line.startswith("PHASES ")]
        if out.returncode != 0 or not phases:
            sys.exit(f"the launch failed (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")
        run: dict[str, tuple[float, float]] = {}
        for name, wall, cpu in json.loads(phases[-1].removeprefix("PHASES ")):
            count = sum(1 for key in run if key.startswith(name + " #"))
            run[f"{name} #{count + 1}"] = (wall, cpu)
        runs.append(run)
    print(f"python start (`python -c pass`): {statistics.median(starts):.3f} s wall (median)")
    ends = {
        key: (statistics.median(r[key][0] for r in runs), statistics.median(r[key][1] for r in runs))
        for key in runs[0]
        if all(key in r for r in runs)
    }
    print(f"| phase ends (median of {args.repeat}) | at (wall) | phase wall | at (CPU) | phase CPU |")
    print("|---|---|---|---|---|")
    previous_wall = previous_cpu = 0.0
    for key, (wall, cpu) in sorted(ends.items(), key=lambda item: item[1][0]):
        step_wall, step_cpu = wall - previous_wall, cpu - previous_cpu
        print(f"| {key} | {wall:.3f} s | {step_wall:.3f} s | {cpu:.3f} s | {step_cpu:.3f} s |")
        previous_wall, previous_cpu = wall, cpu
    print(f"load average (1, 5, 15 min) before: {load_before}, after: {os.getloadavg()}")
    if args.profile:
        out = subprocess.run([*command, "--profile", str(args.profile)], capture_output=True, text=True)
        print(out.stdout.split("PHASES ", 1)[-1].split("\n", 1)[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
