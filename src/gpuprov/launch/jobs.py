"""Job records on this machine: paths.state_dir()/jobs/<job id>/ holds job.json and one log per host.

The record has everything needed to reach the job's hosts again (address, port, user, key, known_hosts,
the env's Python), so `gpuprov jobs / logs / stop` work after the launching client has exited, without
the inventory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from gpuprov import hosts, paths
from gpuprov.errors import BadInput, EnvironmentProblem
from gpuprov.launch import remote

_ID_RE = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$")
MAX_GRACE_S = 3600.0
STARTING = "starting"
RUNNING = "running"
STOPPING = "stopping"
ACTIVE_STATES = (STARTING, RUNNING, STOPPING)
FINAL_STATES = ("succeeded", "failed", "stopped", "interrupted")


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def jobs_root() -> Path:
    return paths.state_dir() / "jobs"


# A job's record is small, but its hosts' output is kept beside it (<host>.log): room for a first screenful.
RECORD_ROOM_MB = 10


def check_room() -> None:
    """The state dir takes a job record and its logs; EnvironmentProblem (exit 3) before any host if not."""
    paths.writable_state_dir("launch", need_mb=RECORD_ROOM_MB)


def is_job_id(text: str) -> bool:
    return bool(_ID_RE.match(text))


def valid_grace(value: float) -> bool:
    return math.isfinite(value) and 0 < value <= MAX_GRACE_S


def _private_dir(path: Path) -> None:
    """path (and jobs_root above it) as directories only the user can enter."""
    for directory in (jobs_root(), path):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if directory.stat().st_mode & 0o077:  # made by an older gpuprov, or with another umask
            directory.chmod(0o700)


def open_private(path: Path, mode: str = "a") -> IO[str]:
    """Open a text file readable by the user only (0600), also when it already existed."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, mode, encoding="utf-8")


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

    @classmethod
    def of(cls, host: hosts.Host, *, python: str, node_rank: int, nproc: int) -> JobHost:
        """The record of an inventory host that runs node NODE_RANK of a job (to_host's inverse)."""
        return cls(
            name=host.name,
            address=host.address,
            port=host.port,
            user=host.user,
            key_file=str(host.key_file) if host.key_file else None,
            known_hosts=str(host.known_hosts),
            python=python,
            node_rank=node_rank,
            nproc=nproc,
        )

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
    # Jobs submitted with `launch --scheduler slurm`: Slurm's job id and the host that runs slurmctld.
    slurm_job_id: str | None = None
    slurm_controller: str | None = None
    # How the ranks were started (--launcher); None in records written before there was a choice: torchrun.
    launcher: str | None = None

    @property
    def remote_dir(self) -> str:
        """The job's directory on each host, relative to the user's home."""
        return f"{remote.JOBS_DIR}/{self.id}"

    @property
    def local_dir(self) -> Path:
        return jobs_root() / self.id

    def log_path(self, host: str) -> Path:
        if not hosts.is_host_name(host):  # checked where names come in (inventory, record); never a path part
            raise ValueError(f"not a host name: {host!r}")
        return self.local_dir / f"{host}.log"

    def save(self) -> None:
        """Write the record whole or not at all: a failed write (a full disk) leaves the last good record,
        or for a first save no job directory, never a .job.json.tmp that `jobs` would list as damaged."""
        text = json.dumps(asdict(self), indent=2, allow_nan=False) + "\n"  # NaN is not JSON
        first = not (self.local_dir / "job.json").exists()
        tmp = self.local_dir / ".job.json.tmp"
        try:
            _private_dir(self.local_dir)
            with open_private(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, self.local_dir / "job.json")
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
                if first and {p.name for p in self.local_dir.iterdir()} <= {".lock"}:
                    shutil.rmtree(self.local_dir)
            raise EnvironmentProblem(
                f"cannot write the record of job {self.id} in {self.local_dir}: {exc.strerror or exc}; "
                f"free some room in the state dir {paths.state_dir()} or make it writable"
            ) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Hold the record's lock and yield the record on disk ({} before the first save).

        Several clients can hold a copy of one job (`launch`, `logs -f`, `jobs`, `stop`); each state change
        re-reads the record under the lock, so a copy read earlier cannot undo a later change.
        """
        _private_dir(self.local_dir)
        with open_private(self.local_dir / ".lock") as lock:
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


class DamagedRecord(BadInput):
    """A job record that is not what gpuprov writes; the message says what, where, and what to do."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(
            f"the record of job {path.parent.name} ({path}) is damaged: {reason}; "
            f"remove {path.parent} if the job is no longer needed"
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)  # type: ignore[arg-type]


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


_FIELD_CHECKS: dict[str, tuple[Any, str]] = {
    "script": (_is_str, "is not a string"),
    "args": (
        lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
        "is not a list of strings",
    ),
    "master": (_is_str, "is not a string"),
    "detach": (lambda v: isinstance(v, bool), "is not true or false"),
    "grace_s": (
        lambda v: _is_number(v) and valid_grace(float(v)),
        f"is not a number of seconds in (0, {MAX_GRACE_S:.0f}]",
    ),
    "created": (_is_number, "is not a time"),
    "state": (
        lambda v: v in ACTIVE_STATES + FINAL_STATES,
        f"is not one of {', '.join(ACTIVE_STATES + FINAL_STATES)}",
    ),
    "exit_codes": (
        lambda v: isinstance(v, dict) and all(c is None or _is_int(c) for c in v.values()),
        "is not a map of host to exit code",
    ),
    "finished": (lambda v: v is None or _is_number(v), "is not a time"),
    "slurm_job_id": (lambda v: v is None or (_is_str(v) and v.isdigit()), "is not a Slurm job id"),
    "launcher": (lambda v: v is None or (_is_str(v) and v.isidentifier()), "is not a launcher name"),
    "slurm_controller": (lambda v: v is None or (_is_str(v) and hosts.is_host_name(v)), "is not a host name"),
}
# Fields later gpuprov versions added: a record written before them lacks them.
_OPTIONAL_FIELDS = {"slurm_job_id": None, "slurm_controller": None, "launcher": None}
_HOST_CHECKS: dict[str, tuple[Any, str]] = {
    "name": (
        lambda v: _is_str(v) and hosts.is_host_name(v),
        "is not a host name (letters, digits, '.', '-', '_', ':')",
    ),
    "address": (lambda v: _is_str(v) and bool(v), "is not an address"),
    "port": (lambda v: _is_int(v) and 1 <= v <= 65535, "is not a TCP port"),
    "user": (lambda v: _is_str(v) and bool(v), "is not a user name"),
    "key_file": (_optional_str, "is not a path"),
    "known_hosts": (_is_str, "is not a path"),
    "python": (lambda v: _is_str(v) and bool(v), "is not a path"),
    "node_rank": (lambda v: _is_int(v) and v >= 0, "is not a node rank"),
    "nproc": (lambda v: _is_int(v) and v >= 1, "is not a process count"),
}


def _checked(data: dict[str, Any], checks: dict[str, tuple[Any, str]], where: str) -> None:
    for name in data:
        if name not in checks:
            raise ValueError(f"{where}unknown field {name!r}")
    for name, (check, problem) in checks.items():
        if name not in data:
            raise ValueError(f"{where}field {name!r} is missing")
        if not check(data[name]):
            raise ValueError(f"{where}field {name!r} {problem}")


def _read_record(path: Path) -> Job:
    """The job recorded in path (jobs_root()/<id>/job.json), every field checked; DamagedRecord if not."""
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text)  # NaN and Infinity (not JSON, but Python writes them) fail the field checks
    except FileNotFoundError:
        raise DamagedRecord(path, "it does not exist") from None
    except OSError as exc:
        raise DamagedRecord(path, f"it cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise DamagedRecord(path, f"it is not JSON ({exc})") from None
    try:
        return _job_from(data, path.parent.name)
    except ValueError as exc:
        raise DamagedRecord(path, str(exc)) from None


def _job_from(data: object, job_id: str) -> Job:
    if not isinstance(data, dict):
        raise ValueError("it is not a JSON object")
    data = dict(data)
    if data.get("id") != job_id:
        raise ValueError(f"field 'id' is {data.get('id')!r}, not the name of its directory")
    if "hosts" not in data:
        raise ValueError("field 'hosts' is missing")
    hosts_data = data.pop("hosts")
    if not isinstance(hosts_data, list) or not hosts_data:
        raise ValueError("field 'hosts' is not a list of hosts")
    data = {**_OPTIONAL_FIELDS, **data}
    _checked({k: v for k, v in data.items() if k != "id"}, _FIELD_CHECKS, "")
    job_hosts = []
    for index, host in enumerate(hosts_data):
        where = f"hosts[{index}]: "
        if not isinstance(host, dict):
            raise ValueError(f"{where}not a JSON object")
        _checked(host, _HOST_CHECKS, where)
        job_hosts.append(JobHost(**host))
    names = [h.name for h in job_hosts]
    if len(set(names)) != len(names):
        raise ValueError("field 'hosts' names a host twice")
    data["grace_s"] = float(data["grace_s"])
    return Job(hosts=job_hosts, **data)


def load(job_id: str) -> Job:
    if not is_job_id(job_id):
        raise BadInput(f"{job_id!r} is not a job id (like 20250101-120000-ab12); `gpuprov jobs` lists them")
    path = jobs_root() / job_id / "job.json"
    if not path.exists() and not (jobs_root() / job_id).is_dir():
        raise BadInput(f"no job {job_id} in {jobs_root()}; `gpuprov jobs` lists the jobs started from here")
    return _read_record(path)


def all_jobs() -> tuple[list[Job], list[DamagedRecord]]:
    """Every job recorded here, oldest first; and the records (job directories) that are damaged."""
    root = jobs_root()
    found: list[Job] = []
    damaged: list[DamagedRecord] = []
    if root.is_dir():
        for entry in sorted(root.iterdir()):
            if not entry.is_dir() or entry.is_symlink():
                continue
            if not is_job_id(entry.name):
                if (entry / "job.json").exists():
                    damaged.append(DamagedRecord(entry / "job.json", "its directory's name is not a job id"))
                continue
            try:
                found.append(_read_record(entry / "job.json"))
            except DamagedRecord as exc:
                damaged.append(exc)
    return sorted(found, key=lambda job: job.created), damaged
