"""How long a no-op re-run of the full bootstrap takes: gpuprov against plain ansible-playbook.

    .venv/bin/python benchmarks/bootstrap.py [--repeat 2] [--strict] [--profile] [--keep]

On one 4-node debian12 sandbox (started here, removed after unless --keep), with the sandbox lock (the
sample lock of inventory/sample/, with the PyTorch the sandbox mirror serves: 2.13.0, CPU build): every host
is bootstrapped once (untimed: it installs everything), then, in the same run, each repetition measures in
turn (wall clock of the whole command, from start to exit):

  baseline   `ansible-playbook -i INVENTORY playbooks/site.yml -e @LOCK` with stock settings: ANSIBLE_CONFIG
             points at an empty file (so: no pipelining, forks 5, gathering implicit, memory fact cache,
             Ansible's default ssh_args with ControlPersist=60s). Only ANSIBLE_ROLES_PATH is set, because
             the roles live beside playbooks/, not under it. Host key checking stays on (the inventory's
             known_hosts with StrictHostKeyChecking=yes), as for gpuprov.
  gpuprov 4  `gpuprov bootstrap INVENTORY -e @LOCK` (preflight included)
  gpuprov 1  the same with `--limit node1`

Every measured run must be a real no-op (exit 0, changed=0 and failed=0 on every host), or the script stops.
SSH connections: both tools use Ansible's default control path (~/.ansible/cp), so each run finds the
master connections the run before it left (as a user re-running either tool would).

Targets (issue 5): gpuprov at least 2x faster than the baseline on 4 nodes, and the 4-node run within 1.5x
of the 1-node run (fan-out, not a queue). The table shows medians; with --strict the exit code is 1 when a
target is missed. --profile adds one untimed gpuprov run with Ansible's profile_tasks callback and prints
the slowest tasks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
SAMPLE_LOCK = REPO / "inventory" / "sample" / "group_vars" / "all" / "gpu_stack.yml"
NODES = 4
SPEEDUP_TARGET = 2.0  # baseline / gpuprov, 4 nodes
FANOUT_TARGET = 1.5  # gpuprov 4 nodes / gpuprov 1 node
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@dataclass(frozen=True)
class Bench:
    env: dict[str, str]  # the environment of every command: no ANSIBLE_* from the caller
    inventory: Path
    lock: Path
    work: Path


def clean_env(state_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["GPUPROV_STATE_DIR"] = str(state_dir)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", os.defpath)])
    return env


def sandbox_lock(path: Path) -> Path:
    """The sample lock with the PyTorch the sandbox mirror serves (2.13.0, CPU build; no GPU there)."""
    data = yaml.safe_load(SAMPLE_LOCK.read_text())
    data["gpu_stack"].update(pytorch_version="2.13.0", pytorch_cuda_tag="cpu")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(argv: Sequence[str], env: dict[str, str], log: Path) -> tuple[float, int, str]:
    """Seconds the command took from start to exit, its exit code, its stdout (all output kept in log)."""
    began = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    log.write_text(proc.stdout + proc.stderr)
    return seconds, proc.returncode, proc.stdout


def gpuprov_bootstrap(bench: Bench, label: str, *extra: str, env: dict[str, str] | None = None) -> float:
    argv = [str(BIN / "gpuprov"), "bootstrap", str(bench.inventory), "-e", f"@{bench.lock}", "--json", *extra]
    log = bench.work / f"{label}.log"
    seconds, code, output = run(argv, env or bench.env, log)
    if code != 0:
        raise SystemExit(f"{label}: gpuprov bootstrap exited {code}; see {log}")
    start = re.search(r"^\{$", output, re.M)  # --json: the summary, after any plain progress lines
    if start is None:
        raise SystemExit(f"{label}: no JSON summary on stdout; see {log}")
    summary = json.loads(output[start.start() :])
    for host, counts in summary["hosts"].items():
        if counts["changed"] or counts["failed"] or counts["unreachable"]:
            raise SystemExit(f"{label}: not a no-op on {host}: {counts}; see {log}")
    return seconds


def plain_playbook(bench: Bench, label: str) -> float:
    empty = bench.work / "empty-ansible.cfg"
    empty.write_text("")
    env = {**bench.env, "ANSIBLE_CONFIG": str(empty), "ANSIBLE_ROLES_PATH": str(REPO / "roles")}
    argv = [
        str(BIN / "ansible-playbook"), "-i", str(bench.inventory), str(REPO / "playbooks" / "site.yml"),
        "-e", f"@{bench.lock}",
    ]  # fmt: skip
    log = bench.work / f"{label}.log"
    seconds, code, output = run(argv, env, log)
    recap = {m[1]: (int(m[3]), int(m[4]), int(m[5])) for m in RECAP.finditer(output)}
    if code != 0 or len(recap) < NODES:
        raise SystemExit(f"{label}: ansible-playbook exited {code}; see {log}")
    for host, counts in recap.items():
        if any(counts):
            raise SystemExit(
                f"{label}: not a no-op on {host} (changed, unreachable, failed = {counts}); see {log}"
            )
    return seconds


def profile(bench: Bench, top: int) -> None:
    """One untimed gpuprov run with profile_tasks; prints its slowest tasks from the run's Ansible log."""
    env = {**bench.env, "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
           "PROFILE_TASKS_TASK_OUTPUT_LIMIT": str(top)}  # fmt: skip
    gpuprov_bootstrap(bench, "profile", env=env)
    runs = sorted((Path(bench.env["GPUPROV_STATE_DIR"]) / "runs").iterdir())
    text = (runs[-1] / "stdout").read_text()
    print(f"\nslowest tasks of a no-op gpuprov run on {NODES} nodes (profile_tasks, {runs[-1] / 'stdout'}):")
    print(text[text.index("TASKS RECAP") :].split("\n", 3)[-1].rstrip())


def table(samples: dict[str, list[float]], repeat: int) -> bool:
    base = statistics.median(samples["baseline"])
    four = statistics.median(samples["gpuprov4"])
    one = statistics.median(samples["gpuprov1"])
    speedup, fanout = base / four, four / one
    rows = [
        ("ansible-playbook, stock settings, 4 nodes", f"{base:.1f}", "1.00x", "baseline", ""),
        (f"gpuprov bootstrap, {NODES} nodes", f"{four:.1f}", f"{speedup:.2f}x",
         f">= {SPEEDUP_TARGET:g}x", "yes" if speedup >= SPEEDUP_TARGET else "NO"),
        ("gpuprov bootstrap, 1 node (--limit node1)", f"{one:.1f}", f"{base / one:.2f}x", "", ""),
        (f"gpuprov {NODES} nodes / 1 node (fan-out)", "", f"{fanout:.2f}x",
         f"<= {FANOUT_TARGET:g}x", "yes" if fanout <= FANOUT_TARGET else "NO"),
    ]  # fmt: skip
    heading = (f"measure (no-op re-run, median of {repeat})", "seconds", "ratio", "target", "ok")
    widths = [max(len(r[i]) for r in [heading, *rows]) for i in range(5)]
    for row in [heading, *rows]:
        first, seconds, ratio, target, ok = row
        w = widths
        print(f"{first:<{w[0]}}  {seconds:>{w[1]}}  {ratio:>{w[2]}}  {target:<{w[3]}}  {ok}".rstrip())
    print("(ratio: baseline seconds / these seconds; on the fan-out row: 4-node seconds / 1-node seconds)")
    print("samples (s): " + "; ".join(f"{k} {', '.join(f'{s:.1f}' for s in v)}" for k, v in samples.items()))
    return speedup >= SPEEDUP_TARGET and fanout <= FANOUT_TARGET


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=2, help="measurements of each kind (default 2)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--profile", action="store_true", help="also print the slowest tasks (profile_tasks)")
    parser.add_argument("--keep", action="store_true", help="keep the sandbox and its state dir afterwards")
    parser.add_argument("--name", help="sandbox name (default bench-bootstrap-<random>); reused if it exists")
    parser.add_argument("--state-dir", type=Path, help="GPUPROV_STATE_DIR (default: a new temporary one)")
    args = parser.parse_args()

    state = args.state_dir or Path(tempfile.mkdtemp(prefix="gpuprov-bench-bootstrap-"))
    env = clean_env(state)
    name = args.name or f"bench-bootstrap-{uuid.uuid4().hex[:6]}"
    gpuprov = [str(BIN / "gpuprov"), "-q", "sandbox"]
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (1 min) at the start")
    print(f"starting sandbox {name} ({NODES} debian12 nodes), state dir {state} ...", flush=True)
    subprocess.run([*gpuprov, "up", "--name", name, "--nodes", str(NODES)], env=env, check=True)
    try:
        inventory = Path(
            subprocess.run([*gpuprov, "inventory", "--name", name], env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
        )  # fmt: skip
        work = state / "bench"
        work.mkdir(exist_ok=True)
        bench = Bench(env, inventory, sandbox_lock(work / "lock.yml"), work)

        print("first bootstrap of every host (untimed) ...", flush=True)
        began = time.perf_counter()
        argv = [str(BIN / "gpuprov"), "bootstrap", str(inventory), "-e", f"@{bench.lock}"]
        _, code, _ = run(argv, env, work / "first.log")
        if code != 0:
            raise SystemExit(f"first bootstrap exited {code}; see {work / 'first.log'}")
        print(f"  done in {time.perf_counter() - began:.0f} s", flush=True)

        samples: dict[str, list[float]] = {"baseline": [], "gpuprov4": [], "gpuprov1": []}
        for i in range(1, args.repeat + 1):
            # Interleaved, so that a change in the machine's load falls on every measure alike.
            samples["baseline"].append(plain_playbook(bench, f"baseline-{i}"))
            samples["gpuprov4"].append(gpuprov_bootstrap(bench, f"gpuprov4-{i}"))
            samples["gpuprov1"].append(gpuprov_bootstrap(bench, f"gpuprov1-{i}", "--limit", "node1"))
            print(
                f"  repetition {i}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in samples.items()),
                flush=True,
            )

        print(f"\nload average {os.getloadavg()[0]:.1f} (1 min) at the end; logs in {work}\n")
        met = table(samples, args.repeat)
        if args.profile:
            profile(bench, 20)
    finally:
        if not args.keep:
            subprocess.run([*gpuprov, "down", "--name", name], env=env, capture_output=True)
            if not args.state_dir:
                shutil.rmtree(state, ignore_errors=True)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
