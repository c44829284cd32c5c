"""What a no-op re-run of the full bootstrap costs: stock ansible-playbook, gpuprov (its drift check),
gpuprov --full, gpuprov --full with Mitogen.

    .venv/bin/python benchmarks/bootstrap.py [--repeat 2] [--nodes 4] [--strict] [--profile] [--keep]
                                             [--tools stock,gpuprov,full,mitogen] [--name NAME --warm]

On one 4-node debian12 sandbox (started here, removed after unless --keep), with the sandbox lock (the
sample lock of inventory/sample/, with the PyTorch the sandbox mirror serves: 2.13.0, CPU build): every host
is bootstrapped once (untimed: it installs everything), then, in the same run, each repetition measures in
turn, on 4 hosts and on 1 (`--limit node1`); `--nodes N` measures N hosts and 1 instead of 4 and 1:

  stock      `ansible-playbook -i INVENTORY playbooks/site.yml -e @LOCK` with stock settings: ANSIBLE_CONFIG
             points at an empty file (so: no pipelining, forks 5, gathering implicit, memory fact cache,
             Ansible's default ssh_args with ControlPersist=60s). Only ANSIBLE_ROLES_PATH is set, because
             the roles live beside playbooks/, not under it. Host key checking stays on (the inventory's
             known_hosts with StrictHostKeyChecking=yes), as for gpuprov.
  gpuprov    `gpuprov bootstrap INVENTORY -e @LOCK` (preflight included; strategy linear): the default, with
             the drift check, which on hosts as the last run left them starts no Ansible (docs/bootstrap.md)
  full       `gpuprov bootstrap --full ...`: every role through Ansible, as before the drift check
  mitogen    `--full` with `--strategy mitogen` (Mitogen for Ansible; skipped when it is not installed)

Three costs of each run:
  wall        seconds from start to exit;
  controller  CPU seconds of every process the command started, ssh included: each command runs in a
              cgroup of its own (cgroup v1 cpuacct or v2 cpu.stat), which also holds the SSH master
              connections it leaves behind (ControlPersist) and so charges their work to the run they
              serve; where no cgroup can be made, the children's rusage (which misses daemonised ssh);
  nodes       CPU seconds of the node containers the run targets, from each container's cgroup counters
              (found from its init process's /proc/PID/cgroup), divided per host.
Beside them: the task results Ansible reported per host (ok, skipped, failed, unreachable, ignored: stock's
recap lines, gpuprov's --json summary) and the controller CPU per task result, so that the controller ratio
shows as its two factors (results per host x CPU per result, each against stock's); and the CPU seconds of
gpuprov's own process (ansible-runner reading the events, the display: `gpuprov` is run through a wrapper
that prints its RUSAGE_SELF at exit). And where each tool's controller CPU goes: ansible-playbook's own
process (strategy, variables, includes, callbacks), its workers with the ssh clients and sftp they ran (both
from a sitecustomize probe that writes ansible-playbook's rusage at exit), the ssh masters and anything else
not reaped (the cgroup's total less the others), and gpuprov's own process.

Every measured run must be a real no-op (exit 0, changed=0 and failed=0 on every host), or the script stops.
SSH connections: stock and gpuprov use Ansible's default control path (~/.ansible/cp), so each run finds the
master connections the run before it left (as a user re-running either tool would); Mitogen opens its own.

Targets (issue 11), for each tool against stock in the same run: node CPU per host of the 4-host no-op
re-run at most 1/3 of stock's, controller CPU per host at most 1/2, wall time at least 2x faster; per-host
cost (node and controller CPU) flat from 1 to 4 hosts (4-host / 1-host per-host cost at most FLAT_TARGET);
and (issue 5) the 4-host wall time within 1.5x of the 1-host one. The table shows medians; with --strict the
exit code is 1 when a tool misses a target. --profile adds one untimed gpuprov run with Ansible's
profile_tasks callback and prints the slowest tasks.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from cgroup_cpu import cgroup_cpu_file, cpu_seconds, node_counters  # beside this script

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
SAMPLE_LOCK = REPO / "inventory" / "sample" / "group_vars" / "all" / "gpu_stack.yml"
NODES = 4  # the sandbox's nodes; --nodes sets it
TOOLS = {
    "stock": "ansible-playbook, stock settings",
    "gpuprov": "gpuprov bootstrap (drift check)",
    "full": "gpuprov bootstrap --full",
    "mitogen": "gpuprov bootstrap --full --strategy mitogen",
}
NODE_CPU_TARGET = 1 / 3  # node CPU per host, tool / stock, 4 hosts
CONTROLLER_CPU_TARGET = 1 / 2  # controller CPU per host, tool / stock, 4 hosts
SPEEDUP_TARGET = 2.0  # stock wall / tool wall, 4 hosts
FLAT_TARGET = 1.25  # per-host CPU on 4 hosts / per-host CPU on 1 host
FANOUT_TARGET = 1.5  # wall on 4 hosts / wall on 1 host (issue 5)
RECAP = re.compile(
    r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)"
    r"\s+rescued=\d+\s+ignored=(\d+)",
    re.M,
)
COUNTED = ("ok", "failed", "unreachable", "skipped", "ignored")  # a task result each (changed is within ok)


@dataclass(frozen=True)
class Cost:
    wall: float  # seconds
    controller: float  # CPU seconds on this machine, every process of the run
    nodes: float  # CPU seconds on the nodes the run targets, all of them together
    results: int = 0  # task results Ansible reported (ok, skipped, failed...), every host together
    own: float = 0.0  # CPU seconds of gpuprov's own process (ansible-runner reading the events, the display)
    main: float = 0.0  # CPU seconds of ansible-playbook's own process (strategy, variables, callbacks)
    workers: float = 0.0  # CPU seconds of its reaped children: task workers and the ssh clients they ran


@dataclass
class Bench:
    env: dict[str, str]  # the environment of every command: no ANSIBLE_* nor GPUPROV_STRATEGY from the caller
    inventory: Path
    lock: Path
    work: Path
    nodes: dict[str, Path]  # host name -> the CPU counter file of its container's cgroup
    samples: dict[tuple[str, int], list[Cost]] = field(default_factory=dict)


def clean_env(state_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k != "GPUPROV_STRATEGY"}
    env["GPUPROV_STATE_DIR"] = str(state_dir)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", os.defpath)])
    return env


def sandbox_lock(path: Path) -> Path:
    """The sample lock with the PyTorch the sandbox mirror serves (2.13.0, CPU build; no GPU there)."""
    data = yaml.safe_load(SAMPLE_LOCK.read_text())
    data["gpu_stack"].update(pytorch_version="2.13.0", pytorch_cuda_tag="cpu")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ----- CPU counters --------------------------------------------------------------------------------------


class ControllerMeter:
    """CPU of every process a command starts, from a cgroup of their own; else from the children's rusage."""

    def __init__(self, name: str) -> None:
        own = cgroup_cpu_file(os.getpid())
        self.group: Path | None = own.parent / name  # a child of this script's cgroup, v1 or v2 alike
        self.counter = self.group / own.name
        self.how = f"cgroup {self.group}"
        try:
            self.group.mkdir()
            cpu_seconds(self.counter)
        except (OSError, SystemExit):
            self.group = None
            self.how = "rusage of the children (daemonised ssh masters not counted)"

    def join(self) -> None:
        """preexec_fn of each measured command: the child moves itself into the group."""
        if self.group is not None:
            (self.group / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> float:
        if self.group is not None:
            return cpu_seconds(self.counter)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def close(self) -> None:
        """Remove the group once the SSH masters in it are gone (ControlPersist: 60 or 120 s)."""
        if self.group is None:
            return
        for _ in range(130):
            with contextlib.suppress(OSError):
                self.group.rmdir()
                return
            time.sleep(1)
        print(f"note: {self.group} still holds processes; remove it with rmdir once they exit")


METER: ControllerMeter


@contextlib.contextmanager
def measured(bench: Bench, hosts: Sequence[str]) -> Iterator[list[float]]:
    """Yields a list that holds, once the block ends: wall seconds, controller CPU s, nodes' CPU s."""
    result: list[float] = []
    nodes_before = sum(cpu_seconds(bench.nodes[h]) for h in hosts)
    controller_before = METER.seconds()
    began = time.perf_counter()
    yield result
    result.append(time.perf_counter() - began)
    result.append(METER.seconds() - controller_before)
    result.append(sum(cpu_seconds(bench.nodes[h]) for h in hosts) - nodes_before)


def run(argv: Sequence[str], env: dict[str, str], log: Path) -> tuple[int, str]:
    """The command's exit code and stdout (all output kept in log), run in the controller's meter group."""
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, preexec_fn=METER.join)
    log.write_text(proc.stdout + proc.stderr)
    return proc.returncode, proc.stdout


# ----- the measured commands ---------------------------------------------------------------------------


# `gpuprov ARGS` as its entry point runs it, printing its own process's CPU seconds (not its children's:
# ansible-playbook, its workers, ssh) on stderr at exit, to show what ansible-runner's event handling costs.
OWN_CPU = "GPUPROV_OWN_CPU"
WITH_OWN_CPU = (
    "import atexit, resource, sys\n"
    "def own():\n"
    "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
    f"    print('{OWN_CPU}', u.ru_utime + u.ru_stime, file=sys.stderr)\n"
    "atexit.register(own)\n"
    "sys.argv[0] = 'gpuprov'\n"
    "from gpuprov.cli import main\n"
    "main()\n"
)


# ansible-playbook's own CPU and its reaped children's (task workers, with the ssh clients and sftp each ran),
# appended to $GPUPROV_BENCH_SPLIT at its exit. A sitecustomize on PYTHONPATH, so that it reaches the
# ansible-playbook that ansible-runner starts for gpuprov as well as stock's. Forked workers leave through
# os._exit and never run atexit; the pid check is for any other fork.
SPLIT = "GPUPROV_BENCH_SPLIT"
SPLIT_HOOK = (
    "import atexit, os, resource, sys\n"
    f"_out = os.environ.get('{SPLIT}')\n"
    "if _out and sys.argv and os.path.basename(sys.argv[0]) == 'ansible-playbook':\n"
    "    _pid = os.getpid()\n"
    "    def _split():\n"
    "        if os.getpid() == _pid:\n"
    "            s = resource.getrusage(resource.RUSAGE_SELF)\n"
    "            c = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "            with open(_out, 'a') as f:\n"
    "                f.write(f'{s.ru_utime + s.ru_stime} {c.ru_utime + c.ru_stime}\\n')\n"
    "    atexit.register(_split)\n"
)


def split_env(bench: Bench, env: dict[str, str], label: str) -> tuple[dict[str, str], Path]:
    hook = bench.work / "split-hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SPLIT_HOOK)
    out = bench.work / f"{label}.split"
    out.unlink(missing_ok=True)
    path = os.pathsep.join(p for p in (str(hook), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, SPLIT: str(out)}, out


def split_cpu(out: Path) -> tuple[float, float]:
    """ansible-playbook's own CPU seconds and its workers' (summed over every ansible-playbook of the run)."""
    rows = [line.split() for line in out.read_text().splitlines()] if out.is_file() else []
    return sum(float(r[0]) for r in rows), sum(float(r[1]) for r in rows)


def own_cpu(log: Path) -> float:
    found = re.findall(rf"{OWN_CPU} (\S+)$", log.read_text(), re.M)
    return float(found[-1]) if found else 0.0


def gpuprov_argv(bench: Bench, tool: str, hosts: int) -> list[str]:
    argv = [
        str(BIN / "python"),
        "-c",
        WITH_OWN_CPU,
        "bootstrap",
        str(bench.inventory),
        "-e",
        f"@{bench.lock}",
        "--json",
    ]
    if tool in ("full", "mitogen"):
        argv += ["--full"]
    if tool == "mitogen":
        argv += ["--strategy", "mitogen"]
    return argv + (["--limit", "node1"] if hosts == 1 else [])


def check_gpuprov(label: str, code: int, output: str, log: Path, hosts: int) -> int:
    """Stops unless the run was a no-op on every host; returns its task results (every host together)."""
    if code != 0:
        raise SystemExit(f"{label}: gpuprov bootstrap exited {code}; see {log}")
    start = re.search(r"^\{$", output, re.M)  # --json: the summary, after any plain progress lines
    if start is None:
        raise SystemExit(f"{label}: no JSON summary on stdout; see {log}")
    summary = json.loads(output[start.start() :])
    if len(summary["hosts"]) != hosts:
        raise SystemExit(
            f"{label}: {len(summary['hosts'])} hosts in the summary, expected {hosts}; see {log}"
        )
    for host, counts in summary["hosts"].items():
        if counts["changed"] or counts["failed"] or counts["unreachable"]:
            raise SystemExit(f"{label}: not a no-op on {host}: {counts}; see {log}")
    drift = summary.get("drift")
    if drift and drift["ansible_run"]:  # the drift check found something: not a no-op without Ansible
        checked = {h: (c["full_run"] or c["drifted"]) for h, c in drift["checked"].items()}
        print(f"  {label}: the drift check ran Ansible on {drift['hosts']}: {checked}", flush=True)
    return sum(counts[k] for counts in summary["hosts"].values() for k in COUNTED)


def stock_argv(bench: Bench, hosts: int) -> list[str]:
    argv = [str(BIN / "ansible-playbook"), "-i", str(bench.inventory), str(REPO / "playbooks" / "site.yml"),
            "-e", f"@{bench.lock}"]  # fmt: skip
    return argv + (["--limit", "node1"] if hosts == 1 else [])


def stock_env(bench: Bench) -> dict[str, str]:
    empty = bench.work / "empty-ansible.cfg"
    empty.write_text("")
    return {**bench.env, "ANSIBLE_CONFIG": str(empty), "ANSIBLE_ROLES_PATH": str(REPO / "roles")}


def check_stock(label: str, code: int, output: str, log: Path, hosts: int) -> int:
    """Stops unless the run was a no-op on every host; returns its task results (every host together)."""
    recap = {m[1]: (int(m[3]), int(m[4]), int(m[5])) for m in RECAP.finditer(output)}
    if code != 0 or len(recap) < hosts:
        raise SystemExit(f"{label}: ansible-playbook exited {code}; see {log}")
    for host, counts in recap.items():
        if any(counts):
            raise SystemExit(
                f"{label}: not a no-op on {host} (changed, unreachable, failed = {counts}); see {log}"
            )
    # ok, unreachable, failed, skipped, ignored of each host's recap line
    return sum(int(m[i]) for m in RECAP.finditer(output) for i in (2, 4, 5, 6, 7))


def measure(bench: Bench, tool: str, hosts: int, label: str) -> Cost:
    log = bench.work / f"{label}.log"
    targets = sorted(bench.nodes)[:hosts]  # node1 alone with --limit node1
    if tool == "stock":
        argv, env, check = stock_argv(bench, hosts), stock_env(bench), check_stock
    else:
        argv, env, check = gpuprov_argv(bench, tool, hosts), bench.env, check_gpuprov
    env, split = split_env(bench, env, label)
    with measured(bench, targets) as result:
        code, output = run(argv, env, log)
    results = check(label, code, output, log, hosts)
    main, workers = split_cpu(split)
    cost = Cost(result[0], result[1], result[2], results, own_cpu(log), main, workers)
    bench.samples.setdefault((tool, hosts), []).append(cost)
    return cost


def profile(bench: Bench, top: int) -> None:
    """One untimed gpuprov run with profile_tasks; prints its slowest tasks from the run's Ansible log."""
    env = {**bench.env, "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
           "PROFILE_TASKS_TASK_OUTPUT_LIMIT": str(top)}  # fmt: skip
    code, output = run(gpuprov_argv(bench, "gpuprov", NODES), env, bench.work / "profile.log")
    check_gpuprov("profile", code, output, bench.work / "profile.log", NODES)
    runs = sorted((Path(bench.env["GPUPROV_STATE_DIR"]) / "runs").iterdir())
    text = (runs[-1] / "stdout").read_text()
    print(f"\nslowest tasks of a no-op gpuprov run on {NODES} nodes (profile_tasks, {runs[-1] / 'stdout'}):")
    print(text[text.index("TASKS RECAP") :].split("\n", 3)[-1].rstrip())


# ----- the table ---------------------------------------------------------------------------------------


def median(bench: Bench, tool: str, hosts: int) -> Cost:
    costs = bench.samples[(tool, hosts)]
    wall, controller, nodes = (
        statistics.median(getattr(c, f) for c in costs) for f in ("wall", "controller", "nodes")
    )
    results = round(statistics.median(c.results for c in costs))
    own, main, workers = (statistics.median(getattr(c, f) for c in costs) for f in ("own", "main", "workers"))
    return Cost(wall, controller, nodes, results, own, main, workers)


def print_rows(rows: Sequence[tuple[str, ...]], right: set[int]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            f"{c:>{w}}" if i in right else f"{c:<{w}}"
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())


def table(bench: Bench, tools: Sequence[str], repeat: int) -> bool:
    rows = [("no-op re-run, median of " + str(repeat), "hosts", "wall s", "ctl CPU s", "ctl/host",
             "node/host", "x wall", "x ctl/host", "x node/host", "results/host",
             "ctl ms/result")]  # fmt: skip
    for hosts in (NODES, 1):
        stock = median(bench, "stock", hosts)
        for tool in tools:
            m = median(bench, tool, hosts)
            rows.append((TOOLS[tool], str(hosts), f"{m.wall:.1f}", f"{m.controller:.1f}",
                         f"{m.controller / hosts:.1f}", f"{m.nodes / hosts:.1f}",
                         f"{stock.wall / m.wall:.2f}", f"{m.controller / stock.controller:.2f}",
                         f"{m.nodes / stock.nodes:.2f}", f"{m.results / hosts:.0f}",
                         f"{1000 * m.controller / max(m.results, 1):.0f}"))  # fmt: skip
    print_rows(rows, right=set(range(1, 11)))
    print("(CPU in seconds; x wall: stock's wall / this one's, so 2.00 is twice as fast; x ctl/host and "
          "x node/host: this one's CPU / stock's, same hosts; results/host: task results Ansible reported "
          "per host, skipped ones included; ctl ms/result: controller CPU per task result)")  # fmt: skip
    reason(bench, tools)
    split(bench, tools)

    met = True
    checks = [(f"measure, {NODES} hosts unless said", "tool", "value", "target", "ok")]
    for tool in tools:
        if tool == "stock":
            continue
        four, one, stock = median(bench, tool, NODES), median(bench, tool, 1), median(bench, "stock", NODES)
        for name, value, target, ok in [
            ("node CPU per host / stock's", four.nodes / stock.nodes, f"<= {NODE_CPU_TARGET:.2f}",
             four.nodes / stock.nodes <= NODE_CPU_TARGET),
            ("controller CPU per host / stock's", four.controller / stock.controller,
             f"<= {CONTROLLER_CPU_TARGET:.2f}", four.controller / stock.controller <= CONTROLLER_CPU_TARGET),
            ("speed-up in wall time over stock", stock.wall / four.wall, f">= {SPEEDUP_TARGET:.2f}",
             stock.wall / four.wall >= SPEEDUP_TARGET),
            (f"node CPU per host, {NODES} hosts / 1 host", four.nodes / NODES / one.nodes,
             f"<= {FLAT_TARGET:.2f}",
             four.nodes / NODES / one.nodes <= FLAT_TARGET),
            (f"controller CPU per host, {NODES} hosts / 1 host", four.controller / NODES / one.controller,
             f"<= {FLAT_TARGET:.2f}", four.controller / NODES / one.controller <= FLAT_TARGET),
            (f"wall, {NODES} hosts / 1 host (fan-out)", four.wall / one.wall, f"<= {FANOUT_TARGET:.2f}",
             four.wall / one.wall <= FANOUT_TARGET),
        ]:  # fmt: skip
            checks.append((name, tool, f"{value:.2f}", target, "yes" if ok else "NO"))
            met = met and ok
    print()
    print_rows(checks, right={2})
    print("samples (wall s / controller CPU s / nodes' CPU s): " + "; ".join(
        f"{tool} {hosts}: " + ", ".join(f"{c.wall:.1f}/{c.controller:.1f}/{c.nodes:.1f}" for c in costs)
        for (tool, hosts), costs in bench.samples.items()
    ))  # fmt: skip
    return met


def reason(bench: Bench, tools: Sequence[str]) -> None:
    """Why the controller ratio is where it is: results per host times CPU per result, each / stock's."""
    stock = median(bench, "stock", NODES)
    for tool in (t for t in tools if t != "stock"):
        m = median(bench, tool, NODES)
        count = m.results / max(stock.results, 1)
        per_result = (m.controller / max(m.results, 1)) / (stock.controller / max(stock.results, 1))
        print(
            f"controller CPU per host, {TOOLS[tool]} / stock's on {NODES} hosts = task results "
            f"{count:.2f} x CPU per result {per_result:.2f} = {count * per_result:.2f} (target "
            f"{CONTROLLER_CPU_TARGET:.2f}; both play the same roles: fewer tasks in a role lower both runs)"
        )
        print(
            f"  of it, {TOOLS[tool]}'s own process (ansible-runner reading the events, the display): "
            f"{m.own:.1f} CPU s on {NODES} hosts, {m.own / max(m.controller, 1e-9):.0%} of its controller CPU"
        )


def split(bench: Bench, tools: Sequence[str]) -> None:
    """Where each tool's controller CPU goes on NODES hosts, per host and per task result."""
    rows: list[tuple[str, ...]] = [(f"controller CPU per host, {NODES} hosts", "ansible main", "workers+ssh",
                                    "ssh masters, rest", "gpuprov process", "ms/result: main", "workers+ssh",
                                    "rest")]  # fmt: skip
    for tool in tools:
        m = median(bench, tool, NODES)
        rest = m.controller - m.main - m.workers - m.own
        per = 1000 / max(m.results, 1)
        rows.append((TOOLS[tool], *(f"{v / NODES:.2f}" for v in (m.main, m.workers, rest, m.own)),
                     *(f"{v * per:.1f}" for v in (m.main, m.workers, rest))))  # fmt: skip
    print()
    print_rows(rows, right=set(range(1, 8)))
    print(
        "(ansible main: ansible-playbook's own process: the strategy, variables, includes, callbacks, the "
        "events runner reads; workers+ssh: the process forked per task and host, with the ssh clients and "
        "sftp it ran; ssh masters, rest: the ControlPersist masters and anything else not reaped, the "
        "cgroup's total less the others; gpuprov process: ansible-runner and gpuprov's display)"
    )
    stock = median(bench, "stock", NODES)
    for tool in (t for t in tools if t != "stock"):
        m = median(bench, tool, NODES)
        if m.controller <= CONTROLLER_CPU_TARGET * stock.controller:  # met: nothing has to fall
            continue
        room = CONTROLLER_CPU_TARGET * stock.controller - (m.controller - m.workers)
        print(
            f"to reach {CONTROLLER_CPU_TARGET:.2f}, {TOOLS[tool]}'s workers "
            f"(now {m.workers / NODES:.2f} CPU s per host) would have to fall to "
            f"{room / NODES:.2f} per host, "
            f"{1000 * room / max(m.results, 1):.1f} ms per result, with everything else as it is (its "
            f"ansible-playbook process alone is {m.main / stock.controller:.2f} of stock's controller CPU)"
        )


def first_bootstrap(bench: Bench) -> None:
    print("first bootstrap of every host (untimed) ...", flush=True)
    began = time.perf_counter()
    argv = [str(BIN / "gpuprov"), "bootstrap", str(bench.inventory), "-e", f"@{bench.lock}"]
    code, _ = run(argv, bench.env, bench.work / "first.log")
    if code != 0:
        raise SystemExit(f"first bootstrap exited {code}; see {bench.work / 'first.log'}")
    print(f"  done in {time.perf_counter() - began:.0f} s", flush=True)


def main() -> int:
    global METER, NODES
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=2, help="measurements of each kind (default 2)")
    parser.add_argument(
        "--tools", default="stock,gpuprov,full,mitogen", help="what to measure (stock always)"
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=NODES,
        help=f"sandbox nodes, measured all together and one alone (default {NODES})",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--profile", action="store_true", help="also print the slowest tasks (profile_tasks)")
    parser.add_argument("--keep", action="store_true", help="keep the sandbox and its state dir afterwards")
    parser.add_argument("--name", help="sandbox name (default bench-bootstrap-<random>); reused if it exists")
    parser.add_argument("--state-dir", type=Path, help="GPUPROV_STATE_DIR (default: a new temporary one)")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="the sandbox named by --name was bootstrapped by an earlier run (--keep): no first bootstrap",
    )
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error(f"--nodes must be at least 2 (is {args.nodes}): per-host figures compare N hosts with 1")
    NODES = args.nodes
    tools = ["stock", *(t for t in TOOLS if t != "stock" and t in args.tools.split(","))]
    if "mitogen" in tools and importlib.util.find_spec("ansible_mitogen") is None:
        print("note: Mitogen for Ansible is not installed (pip install -e '.[mitogen]'); not measured")
        tools.remove("mitogen")

    state = args.state_dir or Path(tempfile.mkdtemp(prefix="gpuprov-bench-bootstrap-"))
    env = clean_env(state)
    name = args.name or f"bench-bootstrap-{uuid.uuid4().hex[:6]}"
    gpuprov = [str(BIN / "gpuprov"), "-q", "sandbox"]
    METER = ControllerMeter(f"gpuprov-{name}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (1 min) at the start")
    print(f"controller CPU from the {METER.how}")
    print(f"starting sandbox {name} ({NODES} debian12 nodes), state dir {state} ...", flush=True)
    subprocess.run([*gpuprov, "up", "--name", name, "--nodes", str(NODES)], env=env, check=True)
    try:
        inventory = Path(
            subprocess.run([*gpuprov, "inventory", "--name", name], env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
        )  # fmt: skip
        work = state / "bench"
        work.mkdir(exist_ok=True)
        bench = Bench(env, inventory, sandbox_lock(work / "lock.yml"), work, node_counters(name, NODES))

        if not args.warm:
            first_bootstrap(bench)

        for i in range(1, args.repeat + 1):
            # Interleaved, so that a change in the machine's load falls on every measure alike.
            for hosts in (NODES, 1):
                for tool in tools:
                    cost = measure(bench, tool, hosts, f"{tool}{hosts}-{i}")
                    print(f"  repetition {i}, {tool} on {hosts} host(s): {cost.wall:.1f} s, controller CPU "
                          f"{cost.controller:.1f} s, nodes' CPU {cost.nodes:.1f} s", flush=True)  # fmt: skip

        print(f"\nload average {os.getloadavg()[0]:.1f} (1 min) at the end; logs in {work}\n")
        met = table(bench, tools, args.repeat)
        if args.profile:
            profile(bench, 20)
    finally:
        if not args.keep:
            subprocess.run([*gpuprov, "down", "--name", name], env=env, capture_output=True)
            if not args.state_dir:
                shutil.rmtree(state, ignore_errors=True)
        METER.close()
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())
