"""CPU seconds of the demo's phases, for benchmarks/demo.py: who used the 2 cores while each phase ran.

At each phase's end (the `demo: <phase> took N s` line) the benchmark takes a Sample of four counters:

- demo:      every process the demo started (setup's pip, debootstrap, gpuprov, ansible-playbook and its
             workers, ssh with its ControlPersist masters), from a cgroup of their own (cgroup v1 cpuacct
             or v2 cpu.stat), so daemonised ssh masters are charged too;
- sandbox:   the sandbox's containers (its mirror and nodes: everything the roles run on the nodes, the
             PyTorch install included), from each container's cgroup; a container's last reading is kept,
             so one removed later still counts;
- docker:    dockerd and containerd (`docker import` of the node image, starting containers);
- machine:   the busy time of all cores (/proc/stat: everything but idle and iowait), the other sessions'
             work included, so `machine - (demo + sandbox + docker)` is what others took from the demo.

The sum of the first three is what the demo itself costs; divided by the core count it is the least wall
time the phase could take on an idle machine of this kind (a floor: it assumes both cores busy throughout).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from bootstrap import ControllerMeter  # beside this script
from cgroup_cpu import container_counter, cpu_seconds

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic()
    demo: float
    sandbox: float
    docker: float
    machine: float
    load: float  # 1-minute load average

    def own(self) -> float:
        return self.demo + self.sandbox + self.docker


def machine_busy(stat: str) -> float:
    """CPU seconds all cores spent busy since boot, from /proc/stat's text (idle and iowait left out)."""
    fields = [int(v) for v in stat.splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest and guest_nice (fields 8 and 9) are already inside user and nice (proc(5)).
    return (sum(fields[:8]) - idle) / TICKS


def process_cpu(pid: str) -> float:
    """utime + stime of one process (proc(5) fields 14 and 15); 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def docker_daemon_pids() -> list[str]:
    """dockerd's and containerd's process ids (not the per-container shims)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if (proc / "comm").read_text().strip() in ("dockerd", "containerd"):
                    found.append(proc.name)
    return found


@dataclass
class DemoMeter:
    """The four counters of the module docstring for one demo run in sandbox `sandbox`."""

    sandbox: str
    # The demo's processes: a cgroup of their own, as benchmarks/bootstrap.py measures its commands.
    processes: ControllerMeter = field(default_factory=lambda: ControllerMeter(f"bench-demo-{os.getpid()}"))
    containers: dict[str, float] = field(default_factory=dict)  # container id -> its last CPU reading
    daemons: list[str] = field(default_factory=docker_daemon_pids)

    def sample(self) -> Sample:
        return Sample(
            at=time.monotonic(),
            demo=self.processes.seconds(),
            sandbox=self._sandbox_cpu(),
            docker=sum(process_cpu(pid) for pid in self.daemons),
            machine=machine_busy(Path("/proc/stat").read_text()),
            load=os.getloadavg()[0],
        )

    def _sandbox_cpu(self) -> float:
        ids = subprocess.run(
            ["docker", "ps", "-q", "--no-trunc", "--filter", f"label=gpuprov.sandbox={self.sandbox}"],
            capture_output=True, text=True, check=False,
        ).stdout.split()  # fmt: skip
        for container in ids:
            with contextlib.suppress(subprocess.CalledProcessError, OSError, SystemExit):
                self.containers[container] = cpu_seconds(container_counter(container))
        return sum(self.containers.values())


def phase_table(phases: list[tuple[str, Sample, Sample]], cores: int) -> list[str]:
    """Lines of the per-phase table: wall, the demo's CPU by kind, the others' CPU, the idle-machine floor."""
    head = (
        f"{'phase':<12} {'wall s':>7} {'demo':>7} {'sandbox':>7} {'docker':>7} {'own CPU':>8}"
        f" {'others':>7} {'load':>5} {'floor s':>8}"
    )
    lines = [head]
    totals = [0.0] * 6
    for name, before, after in phases:
        row = [
            after.at - before.at,
            after.demo - before.demo,
            after.sandbox - before.sandbox,
            after.docker - before.docker,
            after.own() - before.own(),
            max(0.0, (after.machine - before.machine) - (after.own() - before.own())),
        ]
        totals = [t + r for t, r in zip(totals, row, strict=True)]
        lines.append(_row(name, row, f"{after.load:5.1f}", row[4] / cores))
    lines.append(_row("total", totals, "     ", totals[4] / cores))
    return lines


def _row(name: str, row: list[float], load: str, floor: float) -> str:
    wall, demo, sandbox, docker, own, others = row
    return (
        f"{name:<12} {wall:7.1f} {demo:7.1f} {sandbox:7.1f} {docker:7.1f} {own:8.1f}"
        f" {others:7.1f} {load} {floor:8.1f}"
    )
