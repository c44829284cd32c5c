"""Launch and teardown latency of `gpuprov launch` on 2, 8 and 16 sandbox nodes, against plain ssh + torchrun.

    .venv/bin/python benchmarks/launch.py [--nodes 2,8,16] [--repeat 3] [--keep | --reuse STATE_DIR:NAME]
    .venv/bin/python benchmarks/launch.py --nodes 16 --prepare    (start and bootstrap only, for --reuse)
    .venv/bin/python benchmarks/launch.py --slurm --nodes 2 [--repeat 3] [--prepare | --reuse STATE_DIR:NAME]
    .venv/bin/python benchmarks/launch.py --mpirun [--nodes 2,8] ...   (adds the mpirun column)
    .venv/bin/python benchmarks/launch.py --image sandbox --nodes 2 [--repeat 3] [--prepare | --reuse ...]

Launch latency: from the command's start until every rank has printed its first line, for
  - gpuprov: `gpuprov launch --nodes N script` (preflight, push, start, streamed output included);
  - baseline: the usual loop, one host after the other: `scp script host:` then `ssh host torchrun ... &`,
    measured in the same run on the same nodes.
Fair order: at each node count, each tool first runs once untimed (gpuprov, then the loop), printed apart
("first run") and left out of the ratio, with the number of nodes where gpuprov's preflight had no record of
an earlier `import torch` (~/.gpuprov/torch-import-ok): there its first launch imports torch once more, as a
user's first launch after a bootstrap does, and warms the nodes' page cache for the loop that follows. The
timed repetitions then alternate which tool goes first.
Per host: launch latency / nodes, and the controller's CPU seconds (user + system of the launching
processes: gpuprov, or the loop's scp and ssh processes) / nodes. The load average is printed before and
after (the sandbox nodes share this machine's cores with the controller).
Node CPU (launch): CPU seconds of the launched nodes' containers (their cgroups' counters, cgroup_cpu.py)
from the command's start until every first line: sshd, the agent, torchrun and each rank's Python and
torch import. The nodes run on this machine's cores, so node CPU / cores is a floor under the launch
latency that no launcher doing that work can go below here; the table prints it beside the ratio.
Teardown latency: a rank exits non-zero (it prints time.time() just before) until gpuprov has exited,
which it does only after every host reported no process of the job left (checked again afterwards).
For contrast, the same failure with the plain ssh + torchrun loop: the other node's ranks keep running
(measured up to a cap, then cleaned up).

With --mpirun: bootstrap also applies the mpi role (MPI_SWITCH: Open MPI and the node-to-node trust), and
every repetition, in turn with the others on the same nodes, also times `gpuprov launch --launcher mpirun`
(launch latency as above: mpirun on the first host starts every rank; teardown as above: the crashing
rank's EXITING_AT until gpuprov has exited with no process of the job left). A sandbox kept for --reuse
must have been prepared with --mpirun as well.

With --slurm: the sandbox is started with `sandbox up --slurm`, so `gpuprov bootstrap` also runs the slurm
role (node1 is the controller; every node runs slurmd), and the run measures launch latency only: in each
repetition, one after the other on the same nodes, `gpuprov launch --scheduler slurm` (sbatch on the
controller, then Slurm starts the ranks; same latency definition: the command's start until every rank's
first line came back), `gpuprov launch` over SSH, and the ssh loop. A sandbox kept for --reuse must have
been prepared with --slurm as well.

With --image IMAGE (or `--image sandbox`: the sandbox inventory's gpuprov_sandbox_image, the sandbox then
started with --containers): bootstrap also applies the container_runtime role (-e
container_runtime_enabled=true), the image is pulled into every node's engine, and each repetition
times, one after the other on the same nodes, `gpuprov launch` (bare metal) and `gpuprov launch --image
IMAGE` (same latency definition), then checks that no container of the job is left on any node. The
issue's target: the container launch at most 1.5x the bare-metal one at 2 nodes (docs/containers.md).

Starts its own debian12 sandbox (name bench-launch-*), makes it ready with `gpuprov bootstrap` (the
Python env comes from the python_env role, as for a user), and removes it after.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cgroup_cpu import container_counter, cpu_seconds  # noqa: E402  (beside this script)
from tests.integration.conftest import Sandbox, start_sandbox  # noqa: E402

BIN = REPO / ".venv" / "bin"
PYTHON = "/opt/gpuprov/envs/train/bin/python"
BASELINE_CAP_S = 20.0
# In the range the network_tuning role opens to the cluster's nodes (29400-29599), like gpuprov's default.
BASELINE_PORT = 29550
MPI_SWITCH = "mpi_enabled=true"  # the mpi role's switch in site.yml (docs/mpi.md)
# Issue 27's targets: launch at least this fast against the ssh loop (loop latency / gpuprov's) per node
# count, and teardown under TEARDOWN_TARGET_S.
LAUNCH_TARGETS = {2: 1.0, 8: 1.2}
TEARDOWN_TARGET_S = 1.0

FIRST_LINE = 'import os\nprint("first line of rank", os.environ["RANK"], flush=True)\n'
CRASHER = """import os, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print("first line of rank", rank, flush=True)
if rank == world - 1:
    time.sleep(2)
    print("EXITING_AT", repr(time.time()), flush=True)
    sys.exit(3)
time.sleep(300)
"""


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class NodeCpu:
    """CPU seconds the given node containers use from its creation until stop() (their cgroups' counters)."""

    def __init__(self, counters: list[Path]) -> None:
        self.counters = counters
        self.began = sum(cpu_seconds(c) for c in counters)
        self.seconds = float("nan")

    def stop(self) -> None:
        self.seconds = sum(cpu_seconds(c) for c in self.counters) - self.began


def gpuprov_launch(
    env: dict[str, str],
    nodes: int,
    script: Path,
    extra: list[str],
    on_first_lines: Callable[[], None] | None = None,
) -> tuple[float, str, int]:
    """Seconds until all ranks' first lines were seen (then on_first_lines()); the output; the exit code."""
    began = time.monotonic()
    proc = subprocess.Popen(
        [str(BIN / "gpuprov"), "launch", "--nodes", str(nodes), *extra, str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: set[str] = set()
    latency = float("nan")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "first line of rank" in line:
            seen.add(line.split()[-1])
            if len(seen) == nodes and math.isnan(latency):  # the last first line
                latency = time.monotonic() - began
                if on_first_lines is not None:
                    on_first_lines()
    proc.wait()
    return latency, "".join(lines), proc.returncode


def ssh_base(inventory_vars: dict[str, str]) -> list[str]:
    return [
        "-i", inventory_vars["key"], "-o", f"UserKnownHostsFile={inventory_vars['known_hosts']}",
        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
    ]  # fmt: skip


def baseline_launch(
    addresses: list[str],
    ssh: list[str],
    script: Path,
    marker: str,
    cap: float,
    on_first_lines: Callable[[], None] | None = None,
) -> tuple[float, list[subprocess.Popen[str]]]:
    """The usual sequential loop: scp the script, then ssh torchrun in the background, host after host.

    Seconds until every host's first line was seen (then on_first_lines()); the ssh processes."""
    began = time.monotonic()
    procs = []
    master = addresses[0]
    for rank, address in enumerate(addresses):
        subprocess.run(["scp", "-q", *ssh, str(script), f"gpuprov@{address}:bench_{script.name}"], check=True)
        command = (
            f"BENCH_ID={marker} {PYTHON} -m torch.distributed.run --nnodes {len(addresses)} "
            f"--nproc-per-node 1 --node-rank {rank} --master-addr {master} --master-port {BASELINE_PORT} "
            f"bench_{script.name}"
        )
        procs.append(
            subprocess.Popen(
                ["ssh", *ssh, f"gpuprov@{address}", command],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    seen = 0
    for proc in procs:  # each host runs one rank: read until its first line
        assert proc.stdout is not None
        for line in proc.stdout:
            if "first line of rank" in line:
                seen += 1
                break
    latency = time.monotonic() - began if seen == len(addresses) else float("nan")
    if on_first_lines is not None:
        on_first_lines()
    return latency, procs


Run = tuple[float, float, float]  # launch latency, controller CPU seconds, node CPU seconds


def one_gpuprov(env: dict[str, str], n: int, script: Path, counters: list[Path]) -> Run:
    """One `gpuprov launch` on the first n nodes: latency, controller CPU, node CPU until every first line."""
    cpu = children_cpu_s()
    nodes_cpu = NodeCpu(counters[:n])
    latency, out, code = gpuprov_launch(env, n, script, [], nodes_cpu.stop)
    assert code == 0, out
    return latency, children_cpu_s() - cpu, nodes_cpu.seconds


def one_loop(addresses: list[str], ssh: list[str], script: Path, counters: list[Path]) -> Run:
    """One run of the scp + ssh loop on these nodes: as one_gpuprov."""
    cpu = children_cpu_s()
    nodes_cpu = NodeCpu(counters[: len(addresses)])
    latency, procs = baseline_launch(
        addresses, ssh, script, uuid.uuid4().hex[:8], BASELINE_CAP_S, nodes_cpu.stop
    )
    for proc in procs:
        proc.wait(timeout=60)
    return latency, children_cpu_s() - cpu, nodes_cpu.seconds


def hosts_without_import_mark(containers: list[str]) -> int:
    """Nodes where the sandbox's user has no record of an `import torch` by launch's preflight
    (~/.gpuprov/torch-import-ok, onhost/probe.py): there, gpuprov's next launch imports torch once more."""
    script = "ls ~gpuprov/.gpuprov/torch-import-ok/ 2>/dev/null | grep -q ."
    return sum(
        subprocess.run(["docker", "exec", c, "sh", "-c", script], capture_output=True).returncode != 0
        for c in containers
    )


def print_first_runs(first_runs: list[tuple[int, int, Run, Run]]) -> None:
    """Each node count's untimed first run of each tool (gpuprov, then the loop), left out of the ratio."""
    heads = ("gpuprov", "ssh loop", "gpuprov node CPU", "loop node CPU", "torch imports")
    print(f"\n{'first run (untimed)':<22}" + "".join(f"{h:>17}" for h in heads))
    for n, importing, ours, theirs in first_runs:
        values = (ours[0], theirs[0], ours[2], theirs[2])
        print(f"{f'{n} nodes':<22}" + "".join(f"{v:>15.2f} s" for v in values) + f"{importing:>17}")
    print(
        "\n(before the timed repetitions, each node count runs each tool once, gpuprov first, and leaves that"
        " run\n out of the ratio; the repetitions then alternate which tool goes first. torch imports: nodes"
        " where\n gpuprov's preflight had no record of an earlier `import torch` by this user and env, so"
        " that first\n launch imports torch once more on each (docs/launch.md, Preflight); a user's first"
        " launch after a\n bootstrap pays it too)"
    )


def kill_marked(containers: list[str], marker: str) -> None:
    """Remove the baseline's processes: those whose environment has BENCH_ID=marker (nothing else)."""
    script = (
        f"for p in /proc/[0-9]*; do grep -qa 'BENCH_ID={marker}' $p/environ 2>/dev/null && "
        "kill -9 ${p#/proc/}; done; true"
    )
    for name in containers:
        subprocess.run(["docker", "exec", name, "sh", "-c", script], capture_output=True)


def leftovers(containers: list[str], job_id: str) -> int:
    script = f"grep -la 'GPUPROV_JOB_ID={job_id}' /proc/[0-9]*/environ 2>/dev/null | wc -l"
    return sum(
        int(
            subprocess.run(["docker", "exec", c, "sh", "-c", script], capture_output=True, text=True).stdout
            or 0
        )
        for c in containers
    )


def slurm_once(env: dict[str, str], nodes: int, script: Path) -> tuple[float, float]:
    """`gpuprov launch --scheduler slurm`: seconds until every rank's first line, controller CPU seconds."""
    cpu = children_cpu_s()
    latency, out, code = gpuprov_launch(env, nodes, script, ["--scheduler", "slurm"])
    assert code == 0, out
    return latency, children_cpu_s() - cpu


def slurm_rows(
    env: dict[str, str], addresses: list[str], ssh: list[str], nodes: int, repeat: int, script: Path
) -> dict[str, tuple[float, float]]:
    """Median (launch latency, controller CPU seconds) of each way to launch on NODES nodes; the three ways
    take turns in every repetition, so a change of the machine's load touches them alike."""
    runs: dict[str, list[tuple[float, float]]] = {"slurm": [], "ssh": [], "loop": []}
    for _ in range(repeat):
        runs["slurm"].append(slurm_once(env, nodes, script))
        cpu = children_cpu_s()
        latency, out, code = gpuprov_launch(env, nodes, script, [])
        assert code == 0, out
        runs["ssh"].append((latency, children_cpu_s() - cpu))
        cpu = children_cpu_s()
        latency, procs = baseline_launch(addresses[:nodes], ssh, script, uuid.uuid4().hex[:8], BASELINE_CAP_S)
        for proc in procs:
            proc.wait(timeout=60)
        runs["loop"].append((latency, children_cpu_s() - cpu))
        print(
            f"{nodes} nodes: " + ", ".join(f"{way} {run[-1][0]:.2f} s" for way, run in runs.items()),
            flush=True,
        )
    return {
        way: (statistics.median(r[0] for r in run), statistics.median(r[1] for r in run))
        for way, run in runs.items()
    }


def sandbox_image(inventory: Path) -> str:
    """The image the sandbox serves to its nodes (gpuprov_sandbox_image in its inventory)."""
    for line in inventory.read_text().splitlines():
        if line.startswith("gpuprov_sandbox_image="):
            return line.split("=", 1)[1].strip()
    raise SystemExit(f"{inventory} names no gpuprov_sandbox_image; give --image IMAGE")


def pull_everywhere(containers: list[str], image: str) -> None:
    """Put the image into every node's engine before timing (a user pulls once; launch runs what is there)."""
    script = f"command -v docker >/dev/null && docker pull -q {image} || podman pull -q {image}"
    for node in containers:
        subprocess.run(["docker", "exec", node, "sh", "-c", script], check=True, stdout=subprocess.DEVNULL)


def containers_left(containers: list[str]) -> int:
    """gpuprov's job containers still on the nodes (`ENGINE ps -a` inside each node, as root)."""
    script = "for e in docker podman; do command -v $e >/dev/null && $e ps -a --format '{{.Names}}'; done"
    names = []
    for node in containers:
        out = subprocess.run(
            ["docker", "exec", node, "sh", "-c", script], capture_output=True, text=True
        ).stdout
        names += [n for n in out.split() if n.startswith("gpuprov-") and not n.startswith("gpuprov-check-")]
    return len(names)


def image_rows(
    env: dict[str, str], containers: list[str], nodes: int, repeat: int, script: Path, image: str
) -> dict[str, float]:
    """Median launch latency of bare metal and of --image on NODES nodes, taking turns in each repetition."""
    runs: dict[str, list[float]] = {"bare": [], "image": []}
    for _ in range(repeat):
        latency, out, code = gpuprov_launch(env, nodes, script, [])
        assert code == 0, out
        runs["bare"].append(latency)
        latency, out, code = gpuprov_launch(env, nodes, script, ["--image", image])
        assert code == 0, out
        assert containers_left(containers[:nodes]) == 0, "a job container was left on a node"
        runs["image"].append(latency)
        print(f"{nodes} nodes: bare {runs['bare'][-1]:.2f} s, image {runs['image'][-1]:.2f} s", flush=True)
    return {way: statistics.median(run) for way, run in runs.items()}


def print_image_rows(nodes: int, repeat: int, medians: dict[str, float]) -> None:
    bare, image = medians["bare"], medians["image"]
    print(f"\n{f'launch on {nodes} nodes (median of {repeat})':<36} {'latency':>9} {'/ bare':>8}")
    print(f"{'gpuprov launch (bare metal)':<36} {bare:>7.2f} s {1.0:>7.2f}x")
    print(f"{'gpuprov launch --image':<36} {image:>7.2f} s {image / bare:>7.2f}x")
    print(
        "\n(latency: the command's start until every rank's first line; target: --image <= 1.5x at 2 nodes)"
    )


def print_slurm_rows(nodes: int, repeat: int, medians: dict[str, tuple[float, float]]) -> None:
    """The table of slurm_rows: latency and CPU of each way, ratio = ssh loop / that way, and per host."""
    names = {"loop": "ssh loop", "ssh": "gpuprov launch (SSH)", "slurm": "gpuprov launch --scheduler slurm"}
    loop_s = medians["loop"][0]
    print(f"\n{f'launch on {nodes} nodes (median of {repeat})':<36} {'latency':>9} {'ratio':>7} {'CPU':>9}"
          f" {'per host':>9} {'CPU/host':>9}")  # fmt: skip
    for way in ("loop", "ssh", "slurm"):
        latency, cpu = medians[way]
        print(f"{names[way]:<36} {latency:>7.2f} s {loop_s / latency:>6.2f}x {cpu:>7.2f} s"
              f" {latency / nodes:>7.2f} s {cpu / nodes:>7.2f} s")  # fmt: skip
    print(
        "\n(latency: the command's start until every rank's first line; ratio = ssh loop / latency;"
        " CPU: the controller's user+system seconds)"
    )


def print_targets(
    rows: list[tuple[str, float, float, float]], node_cpu: list[tuple[int, float, float, float]], cores: int
) -> None:
    """Each target of issue 27 this run measured: met, or missed, and whether this machine could meet it
    at all: the best ratio (the loop's latency / gpuprov's node-CPU floor) below the target means no
    launcher costing the nodes what gpuprov's does could, the nodes sharing these cores."""
    medians = {label: (ours, theirs) for label, ours, theirs, _ in rows}
    print()
    for n, ours_cpu, _, theirs_s in node_cpu:
        if n not in LAUNCH_TARGETS:
            continue
        ours, theirs = medians[f"launch, {n} nodes"]
        ratio, target, best = theirs / ours, LAUNCH_TARGETS[n], theirs_s / (ours_cpu / cores)
        verdict = "met" if ratio >= target else "missed"
        if ratio < target and best < target:
            why = f"the nodes' start-up fills the {cores} cores"
            verdict += f" (out of reach here: best ratio {best:.2f}x; {why})"
        elif ratio < target:  # the nodes' CPU leaves room: the time is gpuprov's before the agents start
            verdict += (
                f" (not by node CPU: best ratio {best:.2f}x; benchmarks/launch_phases.py shows the time"
                " before the agents start)"
            )
        print(f"target: launch on {n} nodes at least {target:.1f}x the ssh loop: {ratio:.2f}x, {verdict}")
    for label, (ours, _) in medians.items():
        if label.startswith("teardown"):
            verdict = "met" if ours < TEARDOWN_TARGET_S else "missed"
            print(f"target: {label} under {TEARDOWN_TARGET_S:.0f} s: {ours:.2f} s, {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="2,8,16")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--keep", action="store_true", help="keep the sandbox afterwards (prints how to reuse it)"
    )
    parser.add_argument("--reuse", metavar="STATE_DIR:NAME", help="use a sandbox kept by an earlier --keep")
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only start and bootstrap the sandbox, keep it, measure nothing (then run with --reuse)",
    )
    parser.add_argument(
        "--slurm",
        action="store_true",
        help="a sandbox with Slurm (sandbox up --slurm); time `gpuprov launch --scheduler slurm` beside SSH",
    )
    parser.add_argument(
        "--mpirun",
        action="store_true",
        help="apply the mpi role too and time `gpuprov launch --launcher mpirun` beside the others",
    )
    parser.add_argument(
        "--image",
        metavar="IMAGE",
        help="time `gpuprov launch --image IMAGE` beside bare metal ('sandbox': the sandbox's own image)",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.nodes.split(",")]

    if args.reuse:
        state_text, name = args.reuse.rsplit(":", 1)
        state = Path(state_text)
    else:
        state = Path(tempfile.mkdtemp(prefix="gpuprov-bench-"))
        name = f"bench-launch-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "GPUPROV_STATE_DIR": str(state), "GPUPROV_CACHE_DIR": os.environ.get(
        "GPUPROV_CACHE_DIR", str(Path.home() / ".cache" / "gpuprov"))}  # fmt: skip
    print(
        f"sandbox {name} with {max(counts)} nodes (started if need be), then `gpuprov bootstrap` ...",
        flush=True,
    )
    slurm = ["--slurm"] if args.slurm else []
    registry = ["--containers"] if args.image == "sandbox" else []  # the registry serving the sandbox image
    sandbox: Sandbox = start_sandbox(
        name, env, "--nodes", str(max(counts)), "--os", "debian12", *slurm, *registry
    )
    try:
        t = time.monotonic()
        if not args.reuse:  # a kept sandbox was bootstrapped by the run that kept it
            mpi = ["-e", MPI_SWITCH] if args.mpirun else []
            runtime = ["-e", "container_runtime_enabled=true"] if args.image else []
            subprocess.run(
                [str(BIN / "gpuprov"), "--quiet", "bootstrap", str(sandbox.inventory), *mpi, *runtime],
                env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        print(f"bootstrapped in {time.monotonic() - t:.0f} s", flush=True)
        if args.prepare:
            args.keep = True
            return 0
        env["GPUPROV_INVENTORY"] = str(sandbox.inventory)
        sandbox_dir = sandbox.inventory.parent
        ssh = ssh_base(
            {"key": str(sandbox_dir / "id_ed25519"), "known_hosts": str(sandbox_dir / "known_hosts")}
        )
        addresses = [
            line.split("ansible_host=")[1].split()[0]
            for line in sandbox.inventory.read_text().splitlines()
            if "ansible_host=" in line
        ]
        containers = [f"gpuprov-{name}-node{i}" for i in range(1, max(counts) + 1)]
        counters = [container_counter(c) for c in containers]
        work = state / "scripts"
        work.mkdir(exist_ok=True)
        first_line, crasher = work / "first_line.py", work / "crasher.py"
        first_line.write_text(FIRST_LINE)
        crasher.write_text(CRASHER)

        if args.image:
            image = sandbox_image(sandbox.inventory) if args.image == "sandbox" else args.image
            pull_everywhere(containers, image)
            load_before = os.getloadavg()
            for n in counts:
                print_image_rows(
                    n, args.repeat, image_rows(env, containers, n, args.repeat, first_line, image)
                )
            print(f"load average (1, 5, 15 min) before: {load_before}, after: {os.getloadavg()}")
            return 0
        if args.slurm:
            load_before = os.getloadavg()
            for n in counts:
                print_slurm_rows(n, args.repeat, slurm_rows(env, addresses, ssh, n, args.repeat, first_line))
            print(f"load average (1, 5, 15 min) before: {load_before}, after: {os.getloadavg()}")
            return 0
        rows = []
        per_host = []
        node_cpu = []  # (nodes, gpuprov's node CPU, the loop's node CPU, the loop's latency)
        first_runs: list[tuple[int, int, Run, Run]] = []  # (nodes, hosts importing torch, gpuprov, loop)
        load_before = os.getloadavg()
        for n in counts:
            ours, theirs, our_cpu, their_cpu, our_nodes, their_nodes = [], [], [], [], [], []
            mpirun_s: list[float] = []
            importing = hosts_without_import_mark(containers[:n])
            warm_ours = one_gpuprov(env, n, first_line, counters)
            warm_theirs = one_loop(addresses[:n], ssh, first_line, counters)
            first_runs.append((n, importing, warm_ours, warm_theirs))
            print(f"first run, {n} nodes (untimed): gpuprov {warm_ours}, loop {warm_theirs}", flush=True)
            for rep in range(args.repeat):
                if args.mpirun:  # the same job, mpirun on the first host starting every rank
                    latency, out, code = gpuprov_launch(env, n, first_line, ["--launcher", "mpirun"])
                    assert code == 0, out
                    mpirun_s.append(latency)
                # Alternate which goes first, so that neither always runs on the nodes the other just warmed.
                if rep % 2:
                    their_run = one_loop(addresses[:n], ssh, first_line, counters)
                    our_run = one_gpuprov(env, n, first_line, counters)
                else:
                    our_run = one_gpuprov(env, n, first_line, counters)
                    their_run = one_loop(addresses[:n], ssh, first_line, counters)
                (latency, cpu_s, node_s), (their_latency, their_cpu_s, their_node_s) = our_run, their_run
                ours.append(latency)
                our_cpu.append(cpu_s)
                our_nodes.append(node_s)
                theirs.append(their_latency)
                their_cpu.append(their_cpu_s)
                their_nodes.append(their_node_s)
            mpirun_median = statistics.median(mpirun_s) if mpirun_s else float("nan")
            rows.append(
                (f"launch, {n} nodes", statistics.median(ours), statistics.median(theirs), mpirun_median)
            )
            print(
                f"{rows[-1][0]}: gpuprov {ours}, loop {theirs}, mpirun {mpirun_s}, "
                f"CPU {our_cpu} / {their_cpu}, node CPU {our_nodes} / {their_nodes}",
                flush=True,
            )
            node_cpu.append(
                (
                    n,
                    statistics.median(our_nodes),
                    statistics.median(their_nodes),
                    statistics.median(theirs),
                )
            )
            per_host.append(
                (
                    n,
                    statistics.median(ours) / n,
                    statistics.median(theirs) / n,
                    statistics.median(our_cpu) / n,
                    statistics.median(their_cpu) / n,
                )
            )

            # Teardown: gpuprov (and with --mpirun, gpuprov launch --launcher mpirun, in turn)
            downs: list[float] = []
            mpirun_downs: list[float] = []
            for _ in range(args.repeat):
                for launcher, into in (("torchrun", downs), ("mpirun", mpirun_downs)):
                    if launcher == "mpirun" and not args.mpirun:
                        continue
                    _, out, code = gpuprov_launch(env, n, crasher, ["--grace", "5", "--launcher", launcher])
                    ended = time.time()
                    assert code == 1, out
                    exiting = next(line for line in out.splitlines() if "EXITING_AT" in line)
                    exited_at = float(exiting.split()[-1])
                    job_id = next(
                        w for w in out.split() if w.count("-") == 2 and w[:8].isdigit() and len(w) == 20
                    )
                    assert leftovers(containers[:n], job_id) == 0, f"processes of {job_id} left"
                    into.append(ended - exited_at)
            print(f"teardown, {n} nodes: gpuprov {downs}, mpirun {mpirun_downs}", flush=True)
            # Teardown: the plain loop (peers keep running: measured up to the cap).
            marker = uuid.uuid4().hex[:8]
            _, procs = baseline_launch(addresses[:n], ssh, crasher, marker, BASELINE_CAP_S)
            began = time.time()
            deadline = time.monotonic() + BASELINE_CAP_S
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                time.sleep(0.1)
            plain = time.time() - began + 2.0  # +2 s: the crashing rank sleeps 2 s after its first line
            still = sum(p.poll() is None for p in procs)
            kill_marked(containers[:n], marker)
            for proc in procs:
                proc.kill()
            rows.append(
                (
                    f"teardown, {n} nodes",
                    statistics.median(downs),
                    plain if not still else float("inf"),
                    statistics.median(mpirun_downs) if mpirun_downs else float("nan"),
                )
            )

        print()
        heading = f"measure (median of {args.repeat})"
        mpirun_head = f" {'mpirun':>10}" if args.mpirun else ""
        print(f"{heading:<28} {'gpuprov':>10} {'ssh loop':>12} {'ratio':>8}{mpirun_head}")
        for label, ours_s, theirs_s, mpirun_row in rows:
            theirs_text = f">{BASELINE_CAP_S:.0f} s" if theirs_s == float("inf") else f"{theirs_s:.2f} s"
            ratio = "-" if theirs_s == float("inf") else f"{theirs_s / ours_s:.2f}x"
            mpirun_text = f" {mpirun_row:>8.2f} s" if args.mpirun else ""
            print(f"{label:<28} {ours_s:>8.2f} s {theirs_text:>12} {ratio:>8}{mpirun_text}")
        print("\n(ratio = ssh loop / gpuprov; '>20 s': the other nodes' ranks were still running at the cap)")
        if args.mpirun:
            print("(gpuprov: --launcher torchrun, the default; mpirun: gpuprov launch --launcher mpirun)")
        heads = ("gpuprov", "ssh loop", "gpuprov CPU", "loop CPU")
        print(f"\n{'per host (launch)':<20}" + "".join(f"{h:>13}" for h in heads))
        for n, *seconds in per_host:
            print(f"{f'{n} nodes':<20}" + "".join(f"{v:>11.3f} s" for v in seconds))
        print("\n(launch latency / nodes; CPU: controller user+system seconds / nodes)")
        cores = os.cpu_count() or 1
        cpu_heads = ("gpuprov", "ssh loop", "gpuprov floor", "loop floor", "best ratio")
        print(f"\n{'node CPU (launch)':<20}" + "".join(f"{h:>15}" for h in cpu_heads))
        for n, ours_cpu, theirs_cpu, theirs_s in node_cpu:
            floors = (ours_cpu, theirs_cpu, ours_cpu / cores, theirs_cpu / cores)
            best = theirs_s / (ours_cpu / cores)
            print(f"{f'{n} nodes':<20}" + "".join(f"{v:>13.2f} s" for v in floors) + f"{best:>14.2f}x")
        print(
            "\n(CPU seconds the launched nodes' containers used from the command's start until every first"
            f" line, median;\n floor = node CPU / {cores} host cores: the shortest wall time this machine can"
            " give for that work,\n the nodes sharing its cores; best ratio = ssh loop latency / gpuprov"
            " floor: the most a launch\n that costs the nodes what gpuprov's does could reach against the"
            " loop here)"
        )
        print_first_runs(first_runs)
        print_targets(rows, node_cpu, cores)
        print(f"load average (1, 5, 15 min) before: {load_before}, after: {os.getloadavg()}")
    finally:
        if args.keep:
            print(f"kept: --reuse {state}:{name}")
        else:
            subprocess.run(
                [str(BIN / "gpuprov"), "sandbox", "down", "--name", name], env=env, capture_output=True
            )
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
