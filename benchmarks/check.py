"""How long `gpuprov check --quick` and the full `gpuprov check` take on 2 and 8 sandbox nodes.

    .venv/bin/python benchmarks/check.py [--nodes 2,8] [--repeat 3] [--name NAME] [--keep]

Starts its own debian12 sandbox (--name, else bench-check-*) with the largest node count, bootstraps it with
`gpuprov bootstrap` (untimed), then for each node count N times `gpuprov check --limit node1..nodeN` with
--quick and without (the full run adds the port test and the gloo all-reduce through gpuprov launch),
interleaved, `--repeat` times each, and prints the median and the range. Every timed run must exit 0 (the
sandbox's warnings allowed). The machine's load average (os.getloadavg) is printed before and after the
timed runs: the figures mean little without it. The sandbox is removed afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.conftest import Sandbox, start_sandbox  # noqa: E402

BIN = REPO / ".venv" / "bin"


def timed_check(sandbox: Sandbox, env: dict[str, str], nodes: int, quick: bool) -> float:
    limit = ",".join(f"node{i}" for i in range(1, nodes + 1))
    args = [str(BIN / "gpuprov"), "--quiet", "check", str(sandbox.inventory), "--limit", limit]
    started = time.monotonic()
    proc = subprocess.run([*args, *(["--quick"] if quick else [])], env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"gpuprov check on {nodes} node(s) exited {proc.returncode}:\n{proc.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="2,8", help="node counts, comma list")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--name", default="", help="the sandbox's name (default bench-check-<random>)")
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running")
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.nodes.split(",")})
    state = Path(tempfile.mkdtemp(prefix="bench-check-state-"))
    env = {**os.environ, "GPUPROV_STATE_DIR": str(state), "COLUMNS": "200"}
    name = args.name or f"bench-check-{uuid.uuid4().hex[:6]}"
    print(f"sandbox {name} with {max(counts)} nodes, then `gpuprov bootstrap` ...", flush=True)
    sandbox = start_sandbox(name, env, "--nodes", str(max(counts)), "--os", "debian12")
    try:
        started = time.monotonic()
        subprocess.run(
            [str(BIN / "gpuprov"), "--quiet", "bootstrap", str(sandbox.inventory)], env=env, check=True
        )
        print(f"bootstrapped in {time.monotonic() - started:.0f} s", flush=True)
        times: dict[tuple[int, bool], list[float]] = {(n, q): [] for n in counts for q in (True, False)}
        before = os.getloadavg()
        for _ in range(args.repeat):
            for n in counts:
                for quick in (True, False):
                    times[n, quick].append(timed_check(sandbox, env, n, quick))
        after = os.getloadavg()
        print(f"\nload average (1, 5, 15 min): before {before}, after {after}; {os.cpu_count()} CPUs")
        print(f"{'command':<28} {'nodes':>5} {'median s':>9} {'min s':>7} {'max s':>7}")
        for (n, quick), values in times.items():
            command = "gpuprov check --quick" if quick else "gpuprov check"
            median = statistics.median(values)
            print(f"{command:<28} {n:>5} {median:>9.1f} {min(values):>7.1f} {max(values):>7.1f}")
    finally:
        if not args.keep:
            subprocess.run([str(BIN / "gpuprov"), "sandbox", "down", "--name", name], env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
