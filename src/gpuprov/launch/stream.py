"""Live output of a job from every host: prefixed 'host/rank', coloured per host, copied to local logs.

Each host runs the agent (attach or follow) on one SSH channel: the job's output arrives on stdout, the
agent's events ('@gpuprov exit N') on stderr. Reader threads turn both into Events on one queue, which
the caller's thread consumes (so Ctrl-C reaches it).
"""

from __future__ import annotations

import queue
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gpuprov import console, ssh
from gpuprov.launch import jobs
from gpuprov.onhost.agent import EVENT_PREFIX

COLORS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
# torchrun's prefix ('[rank3]:'), or Open MPI's mpirun --tag-output ('[1,3]<stdout>:': job, rank, stream).
_RANK_RE = re.compile(r"^\[(?:rank(\d+)\]|\d+,(\d+)\]<std(?:out|err|diag)>):(.*)$")
# Open MPI 4.1.4's --tag-output sometimes ends a rank's line with the next line's tag (seen here: "...
# started[1,1]<stdout>:"); it is no part of what the rank printed.
_TRAILING_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err|diag)>:$")
TAIL_LINES = 3


@dataclass(frozen=True)
class Event:
    host: str
    kind: str  # "line", "exit" or "lost"
    text: str = ""
    code: int | None = None


class HostStream:
    """One host's channel: reader threads put its lines and its end on the shared queue."""

    def __init__(self, host: str, channel: ssh.Channel, events: queue.Queue[Event]) -> None:
        self.host = host
        self.channel = channel
        self.events = events
        self._exit_seen = threading.Event()
        self._out_done = threading.Event()
        threading.Thread(target=self._read_stderr, daemon=True, name=f"{host}-events").start()
        threading.Thread(target=self._read_stdout, daemon=True, name=f"{host}-output").start()

    def _read_stdout(self) -> None:
        try:
            for raw in self.channel.lines():
                self.events.put(Event(self.host, "line", raw.decode(errors="replace").rstrip("\r\n")))
        except ssh.SessionLost:
            pass
        finally:
            self._out_done.set()

    def _read_stderr(self) -> None:
        code: int | None = None
        try:
            for raw in self.channel.stderr_lines():
                line = raw.decode(errors="replace").rstrip("\r\n")
                if line.startswith(EVENT_PREFIX + "exit "):
                    code = int(line.split()[-1])
                elif line and not line.startswith(EVENT_PREFIX):
                    self.events.put(Event(self.host, "line", f"[gpuprov agent] {line}"))
        except (ssh.SessionLost, ValueError):
            pass
        self._out_done.wait(timeout=5)  # the job's last lines before its end
        if code is not None:
            self.events.put(Event(self.host, "exit", code=code))
        else:
            self.events.put(Event(self.host, "lost", text="the SSH connection was lost"))

    def request_stop(self) -> bool:
        """Close the channel's stdin: the agent stops the job (SIGTERM, SIGKILL after the grace period),
        then reports its exit. False when the channel is already gone."""
        try:
            self.channel.shutdown_write()
        except ssh.SessionLost:
            return False
        return not self.channel.closed

    def close(self) -> None:
        self.channel.close()


class Printer:
    """Prints lines as 'host/rank | text' and appends them to one local log file per host."""

    def __init__(
        self,
        hosts: list[str],
        log_paths: dict[str, Path],
        rank_hosts: dict[str, str] | None = None,
        watch: Callable[[str, str], None] | None = None,
    ) -> None:
        # rank_hosts: where each rank runs, for output that arrives through another host (mpirun's).
        self.rank_hosts = rank_hosts or {}
        self.watch = watch  # sees every line (nccl_transport.Watch: NCCL's transport on IB hosts)
        self.width = max(len(h) for h in hosts) + 3
        self.colors = {h: COLORS[i % len(COLORS)] for i, h in enumerate(hosts)}
        self.logs: dict[str, IO[str]] = {}
        for host, path in log_paths.items():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.logs[host] = jobs.open_private(path)  # a job's output can carry its environment
        self.tails: dict[str, deque[str]] = {h: deque(maxlen=TAIL_LINES) for h in hosts}
        self.first_rank_line: dict[str, bool] = {}

    def line(self, host: str, text: str) -> None:
        match = _RANK_RE.match(text)
        rank, body = (
            (match.group(1) or match.group(2), match.group(3).removeprefix(" ")) if match else ("-", text)
        )
        body = _TRAILING_TAG.sub("", body)
        where = self.rank_hosts.get(rank, host)
        console.job_line(f"{where}/{rank}".ljust(self.width), body, self.colors.get(where, "white"))
        self.tails[host].append(text)
        if self.watch is not None:
            self.watch(host, text)
        log = self.logs.get(host)
        if log is not None:
            log.write(text + "\n")
            log.flush()

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


def rank_layout(job: jobs.Job) -> dict[str, str] | None:
    """Global rank -> host for a job whose ranks all report through its first host (mpirun's: --map-by slot
    fills the hostfile's hosts in order); None for the others (each host's lines are its own ranks')."""
    if job.launcher != "mpirun":
        return None
    layout: dict[str, str] = {}
    for h in job.hosts:
        for _ in range(h.nproc):
            layout[str(len(layout))] = h.name
    return layout


def last_lines(path: Path, count: int = TAIL_LINES) -> list[str]:
    """The last lines the ranks printed (torchrun's own summary says less), else the last lines at all."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip("\n") for line in f]
    except OSError:
        return []
    ranked = []
    for line in lines:
        match = _RANK_RE.match(line)
        if match and match.group(3).strip():
            ranked.append(f"rank {match.group(1) or match.group(2)}: {match.group(3).strip()}")
    return (ranked or [line for line in lines if line.strip()])[-count:]
