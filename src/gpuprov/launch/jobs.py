"""Job records on this machine: paths.state_dir()/jobs/<job id>/ holds job.json and one log per host.

The record has everything needed to reach the job's hosts again (address, port, user, key, known_hosts,
the env's Python), so `gpuprov jobs / logs / stop` work after the launching client has exited, without
the inventory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuprov import hosts, paths
from gpuprov.errors import BadInput
from gpuprov.launch import remote

_ID_RE = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
STARTING = "starting"
RUNNING = "running"
STOPPING = "stopping"
ACTIVE_STATES = (STARTING, RUNNING, STOPPING)
FINAL_STATES = ("succeeded", "failed", "stopped", "interrupted")


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def jobs_root() -> Path:
    return paths.state_dir() / "jobs"


@dataclass
class JobHost:
    name: str
    address: str
    port: int
    user: str
    key_file: str | None
    known_hosts: str
    python: str
    node_rank: int
    nproc: int

    def to_host(self) -> hosts.Host:
        return hosts.Host(
            name=self.name,
            address=self.address,
            port=self.port,
            user=self.user,
            key_file=Path(self.key_file) if self.key_file else None,
            known_hosts=Path(self.known_hosts),
        )


@dataclass
class Job:
    id: str
    script: str
    args: list[str]
    hosts: list[JobHost]
    master: str
    detach: bool
    grace_s: float
    created: float = field(default_factory=time.time)
    state: str = RUNNING
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    finished: float | None = None

    @property
    def remote_dir(self) -> str:
        """The job's directory on each host, relative to the user's home."""
        return f"{remote.JOBS_DIR}/{self.id}"

    @property
    def local_dir(self) -> Path:
        return jobs_root() / self.id

    def log_path(self, host: str) -> Path:
        return self.local_dir / f"{host}.log"

    def save(self) -> None:
        self.local_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.local_dir / ".job.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, self.local_dir / "job.json")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Hold the record's lock and yield the record on disk ({} before the first save).

        Several clients can hold a copy of one job (`launch`, `logs -f`, `jobs`, `stop`); each state change
        re-reads the record under the lock, so a copy read earlier cannot undo a later change.
        """
        self.local_dir.mkdir(parents=True, exist_ok=True)
        with open(self.local_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = self.local_dir / "job.json"
            yield json.loads(path.read_text()) if path.is_file() else {}

    def _adopt(self, on_disk: dict[str, Any]) -> None:
        self.state = on_disk["state"]
        self.exit_codes, self.finished = on_disk["exit_codes"], on_disk["finished"]

    def mark(self, state: str) -> bool:
        """Move an active job to `state`; once it has ended, return False and adopt the record."""
        with self._locked() as on_disk:
            recorded = on_disk.get("state")
            if recorded in FINAL_STATES or (recorded == STOPPING and state == RUNNING):
                self._adopt(on_disk)
                return False
            self.state = state
            self.save()
            return True

    def finish(self, state: str, exit_codes: dict[str, int | None]) -> None:
        """Record how the job ended, once: the first end recorded stays.

        A job being stopped ends as `stopped`, whoever sees its ranks exit first.
        """
        with self._locked() as on_disk:
            recorded = on_disk.get("state")
            if recorded in FINAL_STATES:
                self._adopt(on_disk)
                return
            if recorded == STOPPING and state in ("succeeded", "failed"):
                state = "stopped"
            self.state = state
            self.exit_codes = exit_codes
            self.finished = time.time()
            self.save()


def _from_dict(data: dict[str, Any]) -> Job:
    data = dict(data)
    data["hosts"] = [JobHost(**h) for h in data["hosts"]]
    return Job(**data)


def load(job_id: str) -> Job:
    if not _ID_RE.match(job_id):
        raise BadInput(f"{job_id!r} is not a job id (like 20250101-120000-ab12); `gpuprov jobs` lists them")
    path = jobs_root() / job_id / "job.json"
    if not path.is_file():
        raise BadInput(f"no job {job_id} in {jobs_root()}; `gpuprov jobs` lists the jobs started from here")
    try:
        return _from_dict(json.loads(path.read_text()))
    except (ValueError, TypeError, KeyError) as exc:
        raise BadInput(f"the record of job {job_id} ({path}) is damaged: {exc}") from None


def all_jobs() -> list[Job]:
    root = jobs_root()
    found = []
    if root.is_dir():
        for entry in sorted(root.iterdir()):
            if _ID_RE.match(entry.name) and (entry / "job.json").is_file():
                try:
                    found.append(_from_dict(json.loads((entry / "job.json").read_text())))
                except (ValueError, TypeError, KeyError):
                    continue
    return sorted(found, key=lambda job: job.created)
