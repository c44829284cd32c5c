"""What loading an inventory costs a launch: Ansible's full load against gpuprov's inventory cache.

    .venv/bin/python benchmarks/inventory_load.py [--repeat 9] INVENTORY

Each repetition runs, in a fresh Python each (as a launch pays it: imports included), in turn:
  full    gpuprov.hosts.load(INVENTORY): Ansible's configuration, InventoryManager, VariableManager;
  cached  gpuprov.inventory_cache.load(INVENTORY) with the cache filled (a launch's second and later runs
          of an unchanged inventory); the run checks that it did not import Ansible.
Prints the median wall and CPU seconds (time.process_time) of each, and the load average. The cache lives
in a temporary state dir, removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, sys, time
t, c = time.perf_counter(), time.process_time()
from gpuprov import hosts, inventory_cache
load = hosts.load if sys.argv[1] == "full" else inventory_cache.load
inventory = load(sys.argv[2])
print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c,
                  "hosts": len(inventory.hosts), "ansible": "ansible" in sys.modules}))
"""


def once(kind: str, inventory: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, inventory], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(out.stdout.splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("inventory")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gpuprov-inventory-load-") as state:
        env = {**os.environ, "GPUPROV_STATE_DIR": state}
        once("cached", args.inventory, env)  # fills the cache
        runs: dict[str, list[dict[str, float]]] = {"full": [], "cached": []}
        for _ in range(args.repeat):
            for kind in runs:
                runs[kind].append(once(kind, args.inventory, env))
    if any(r["ansible"] for r in runs["cached"]):
        sys.exit("a cached load imported Ansible: the cache was not used")
    hosts = int(runs["full"][0]["hosts"])
    print(f"| load of {args.inventory} ({hosts} hosts), median of {args.repeat} | wall | CPU |")
    print("|---|---|---|")
    for kind, results in runs.items():
        wall = statistics.median(r["wall"] for r in results)
        cpu = statistics.median(r["cpu"] for r in results)
        print(f"| {kind} | {wall:.3f} s | {cpu:.3f} s |")
    print(f"load average (1, 5, 15 min) before: {load_before}, after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
