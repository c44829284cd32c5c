"""Small helpers over paramiko for the launcher: run a command, run a function on every host at once."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import paramiko

from gpuprov import hosts
from gpuprov.errors import GpuprovError
from gpuprov.launch.agent import EVENT_PREFIX

JOBS_DIR = ".gpuprov/jobs"  # on each host, relative to the user's home
CONNECT_TIMEOUT_S = 10.0
T = TypeVar("T")
H = TypeVar("H")


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        lines = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return lines[-1].strip() if lines else f"exit status {self.rc}"


def run(client: paramiko.SSHClient, command: str, timeout: float = 60, stdin: bytes | None = None) -> Result:
    """Run a shell command on the host and wait for it; a dead connection raises GpuprovError."""
    try:
        channel_in, channel_out, channel_err = client.exec_command(command, timeout=timeout)
        if stdin is not None:
            channel_in.write(stdin)
        channel_in.channel.shutdown_write()
        out = channel_out.read().decode(errors="replace")
        err = channel_err.read().decode(errors="replace")
        rc = channel_out.channel.recv_exit_status()
    except (TimeoutError, paramiko.SSHException, OSError, EOFError) as exc:
        raise GpuprovError(f"SSH command failed ({type(exc).__name__}: {exc or 'connection lost'})") from None
    return Result(rc, out, err)


def python_command(python: str, code: str, *args: str) -> str:
    return " ".join(shlex.quote(part) for part in (python, "-c", code, *args))


def home_path(rel: str) -> str:
    """A path under the remote user's home, for a shell command: only $HOME is expanded."""
    return '"$HOME"/' + shlex.quote(rel)


def agent_command(python: str, job_dir: str, *args: str) -> str:
    """Run the job's agent.py (pushed into the job directory) with the env's Python."""
    parts = [shlex.quote(python), home_path(f"{job_dir}/agent.py")]
    parts += [shlex.quote(arg) for arg in args]
    return " ".join(parts)


def log_command(job_dir: str) -> str:
    """Print the job's log on the host, then the end event the log streams wait for."""
    return f"cat {home_path(f'{job_dir}/job.log')}; echo {shlex.quote(EVENT_PREFIX + 'exit 0')} >&2"


def on_all(items: Sequence[H], fn: Callable[[H], T]) -> list[T]:
    """fn on every item at once (one thread each, up to 32); results in input order."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(32, len(items))) as pool:
        return list(pool.map(fn, items))


def connect(host: hosts.Host) -> paramiko.SSHClient:
    client = hosts.connect(host, timeout=CONNECT_TIMEOUT_S)
    transport = client.get_transport()
    if transport is not None:
        transport.set_keepalive(5)  # notice a lost host within seconds, not at the TCP timeout
    return client
