"""CPU seconds from cgroup counters, for the benchmarks: a process's cgroup, and a sandbox's node containers.

A sandbox node is a container; its cgroup counts the CPU of every process in it (sshd, the agent, torchrun,
the ranks), whichever user started them. cgroup v1 (cpuacct.usage, nanoseconds) and v2 (cpu.stat,
usage_usec) alike.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def cgroup_cpu_file(pid: int) -> Path:
    """The CPU counter of the cgroup process `pid` is in: cgroup v1 cpuacct.usage (ns) or v2 cpu.stat."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return CGROUP / controllers / path.lstrip("/") / "cpuacct.usage"
    for line in lines:
        if line.startswith("0::"):
            return CGROUP / line[3:].lstrip("/") / "cpu.stat"
    raise SystemExit(f"no cpuacct or cgroup v2 entry in /proc/{pid}/cgroup")


def cpu_seconds(counter: Path) -> float:
    text = counter.read_text()
    if counter.name == "cpuacct.usage":
        return int(text) / 1e9
    usage = re.search(r"^usage_usec (\d+)$", text, re.M)
    if usage is None:
        raise SystemExit(f"{counter}: no usage_usec")
    return int(usage[1]) / 1e6


def container_counter(container: str) -> Path:
    """The CPU counter of a running container's cgroup (found from its init process), checked readable."""
    pid = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Pid}}", container], check=True, capture_output=True, text=True
    ).stdout.strip()
    counter = cgroup_cpu_file(int(pid))
    cpu_seconds(counter)  # readable, or stop now
    return counter


def node_counters(sandbox: str, expected: int) -> dict[str, Path]:
    """Host name -> the CPU counter of its container, for the `expected` node containers of the sandbox."""
    ids = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=gpuprov.sandbox={sandbox}",
         "--filter", "label=gpuprov.role=node"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    counters = {}
    for container in ids:
        host = subprocess.run(
            ["docker", "inspect", "-f", "{{.Config.Hostname}}", container],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        counters[host] = container_counter(container)
    if len(counters) != expected:
        raise SystemExit(f"found {len(counters)} node containers of sandbox {sandbox}, expected {expected}")
    return counters
