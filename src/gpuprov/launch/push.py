"""Push the script and --workdir to each host's job directory, on one SSH channel per host (receive.py).

Files go to a content-addressed store on the host (~/.gpuprov/files/<sha256>) and are hard-linked into
the job's work directory, so a re-launch sends only the files that changed. The workdir is sent without
.git (and other VCS directories) and without files over --max-file-mb unless --include-large is given.

Only regular files inside the workdir are pushed: a symlink is followed only when it ends at a regular file
inside the workdir (pushed as a copy of that file); one that leads outside it (to /etc/shadow, to
~/.ssh), dangles, or names a directory is skipped and listed. On the hosts, ~/.gpuprov and everything in
it are private to the user (0700 directories, 0600 files): run.sh carries the job's --env values.

A host's push starts beside its preflight (Ahead): once its check's channel is open, receive.py runs on a
second channel of the same connection with the interpreter the environment's shell lines choose, and the
files its store lacks go meanwhile (up to AHEAD_BYTES; more waits until preflight has passed). The job's
directory, run.sh and the master port's hold come only after preflight passed, on the same channel; a
failed preflight closes it, leaving no job directory, only stored files (each renamed into place whole).
Where sshd refuses the second session (MaxSessions 1), or anything else fails there, the push starts over
after preflight as it did before.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpuprov import console, onhost, ssh
from gpuprov.errors import BadInput, GpuprovError

STORE_DIR = ".gpuprov/files"
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".venv"})


@dataclass(frozen=True)
class LocalFile:
    rel: str  # path in the job's work directory, '/'-separated
    path: Path
    sha256: str
    size: int
    executable: bool


@dataclass(frozen=True)
class Payload:
    files: list[LocalFile]
    script_rel: str
    skipped_large: list[str]
    skipped_links: list[str] = field(default_factory=list)  # symlinks not followed (see the docstring)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class PushStats:
    sent: int
    sent_bytes: int
    unchanged: int


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _local(rel: str, path: Path) -> LocalFile:
    info = path.stat()
    return LocalFile(rel, path, _sha256(path), info.st_size, bool(info.st_mode & stat.S_IXUSR))


def _inside(path: Path, workdir: Path) -> Path | None:
    """The regular file a workdir entry stands for, if it is one inside the workdir (links resolved)."""
    if not path.is_symlink():
        return path if stat.S_ISREG(path.lstat().st_mode) else None
    target = path.resolve()
    if target.is_relative_to(workdir) and target.is_file() and not target.is_symlink():
        return target
    return None


def collect(script: Path, workdir: Path | None, include_large: bool, max_file_mb: int) -> Payload:
    """The files a job needs: the workdir's tree (filtered) and the script. workdir is resolved."""
    files: dict[str, LocalFile] = {}
    skipped: list[str] = []
    links: list[str] = []
    limit = max_file_mb * 1024 * 1024
    script_rel = script.name
    if workdir is not None:
        for root, dirs, names in os.walk(workdir):  # does not descend into symlinked directories
            here = Path(root)
            links += [(here / d).relative_to(workdir).as_posix() for d in dirs if (here / d).is_symlink()]
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (here / d).is_symlink())
            for name in sorted(names):
                entry = here / name
                rel = entry.relative_to(workdir).as_posix()
                path = _inside(entry, workdir)
                if path is None:
                    if entry.is_symlink():
                        links.append(rel)
                    continue  # sockets, fifos, devices: not files to push
                if path.stat().st_size > limit and not include_large and path != script:
                    skipped.append(rel)
                    continue
                files[rel] = _local(rel, path)
        if script.is_relative_to(workdir):
            script_rel = script.relative_to(workdir).as_posix()
    if script_rel not in files:
        files[script_rel] = _local(script_rel, script)
    return Payload(sorted(files.values(), key=lambda f: f.rel), script_rel, skipped, sorted(links))


ANSWER_TIMEOUT_S = 60.0  # for each answer of the host's receive.py (a big store listing, slow disks)


class Delivery:
    """One host's push in flight: receive.py on its own channel, holding the files until told to start.

    The same channel then carries the job: start() turns it into the agent's (attach: its stream).
    """

    def __init__(self, host: str, channel: ssh.Channel, stats: PushStats) -> None:
        self.host = host
        self.channel = channel
        self.stats = stats

    def start(self, how: str) -> ssh.Channel:
        """Run `agent.py how` (attach or start) in receive.py's process, on the same channel."""
        self.channel.send(f"{how}\n".encode())
        self.channel.settimeout(None)  # a job's stream waits as long as the job runs
        return self.channel

    def cancel(self) -> None:
        """End of input: receive.py exits without starting anything."""
        self.channel.close()


def receive_command(python: str) -> str:
    """receive.py with the given interpreter (quoted), which it names in its first answer."""
    return onhost.python_command(python, onhost.text("receive.py"), python)


def receive_command_choosing(choose_python: str) -> str:
    """receive.py with the interpreter that shell lines choose into $py (an environment's
    python_choice), which it names in its first answer: the controller can tell whether it is the one
    preflight found."""
    return f'{choose_python}\n"$py" -c {shlex.quote(onhost.text("receive.py"))} "$py"'


@dataclass
class Stored:
    """receive.py on its channel with the payload in the host's store (steps 1-2), no job directory yet."""

    channel: ssh.Channel
    python: str  # the interpreter it runs with, as the command named it
    stats: PushStats


def store(
    host: str,
    client: ssh.Client,
    command: str,
    payload: Payload,
    before_bytes: Callable[[int], bool] | None = None,
) -> Stored:
    """Start receive.py (command), send the files its store lacks; GpuprovError when that fails.

    before_bytes(total): asked with the missing files' size before they are sent; False ends the push
    there (its channel closed, GpuprovError)."""
    unique = {f.sha256: f for f in payload.files}
    header = {"files": [[f.sha256, f.size, f.executable] for f in unique.values()]}
    channel = None
    try:
        channel = ssh.open_channel(client, command, read_timeout=ANSWER_TIMEOUT_S)
        channel.send(json.dumps(header).encode() + b"\n")
        first = json.loads(channel.readline() or b"null")
        if not isinstance(first, dict):
            raise GpuprovError(f"{host}: cannot fill the file store ~/{STORE_DIR}: {_why(channel)}")
        total = sum(unique[sha].size for sha in first["missing"])
        if before_bytes is not None and not before_bytes(total):
            raise GpuprovError(f"{host}: the push was cancelled")
        for sha in first["missing"]:
            with unique[sha].path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    channel.send(block)
        stored = json.loads(channel.readline() or b"null")
        if not isinstance(stored, dict) or "stored" not in stored:
            raise GpuprovError(f"{host}: copying the job's files into ~/{STORE_DIR} failed: {_why(channel)}")
    except (ssh.SessionLost, ValueError, KeyError, TypeError) as exc:
        if channel is not None:
            channel.close()
        why = exc.cause if isinstance(exc, ssh.SessionLost) else exc
        raise GpuprovError(f"{host}: copying the job's files failed: {why}") from None
    except BaseException:
        if channel is not None:
            channel.close()
        raise
    missing = len(first["missing"])
    return Stored(channel, str(first["python"]), PushStats(missing, total, len(unique) - missing))


# Up to this much of the files a host's store lacks goes during preflight; more waits until it has passed:
# a large stream on the same connection would hold back preflight's commands (OpenSSH lets up to 2 MiB
# queue per channel) and could make its reach test, 7 s long, fail on a slow link.
AHEAD_BYTES = 1 << 20


class Ahead:
    """store() run ahead, in a thread of its own, while preflight checks the host on another channel.

    The python it runs with is the environment's guess (its python_choice, the same shell lines preflight
    runs); any failure, or a guess that differs from what preflight found, only means push() starts over
    on a channel of its own (why: failure), so the job's own messages come from there. Files over
    AHEAD_BYTES in all wait for release()."""

    def __init__(self, host: str, client: ssh.Client, choose_python: str, payload: Payload) -> None:
        self.host = host
        self.failure = ""
        self._result: Stored | None = None
        self._cancelled = False
        self._released = threading.Event()
        self._lock = threading.Lock()
        command = receive_command_choosing(choose_python)
        self._thread = threading.Thread(
            target=self._run, args=(client, command, payload), daemon=True, name=f"push-ahead-{host}"
        )
        self._thread.start()

    def _may_send(self, total: int) -> bool:
        if total > AHEAD_BYTES:
            self._released.wait()
        return not self._cancelled

    def _run(self, client: ssh.Client, command: str, payload: Payload) -> None:
        try:
            stored = store(self.host, client, command, payload, self._may_send)
        except BaseException as exc:  # push() starts over; its own attempt reports what is wrong
            self.failure = str(exc) or type(exc).__name__
            return
        with self._lock:
            if self._cancelled:
                stored.channel.close()
            else:
                self._result = stored

    def release(self) -> None:
        """Preflight has passed: the files over AHEAD_BYTES may go now."""
        self._released.set()

    def take(self, python: str) -> Stored | None:
        """Its stored files on their open channel when it ran with python; else None (closed, failure says
        why)."""
        self.release()
        self._thread.join()
        with self._lock:
            stored, self._result = self._result, None
        if stored is not None and stored.python != python:
            stored.channel.close()
            self.failure = f"it ran {stored.python}, preflight found {python}"
            return None
        return stored

    def cancel(self) -> None:
        """Close its channel (now, or once it is done): receive.py ends having made no job directory."""
        with self._lock:
            self._cancelled = True
            if self._result is not None:
                self._result.channel.close()
                self._result = None
        self._released.set()


def push(
    host: str,
    client: ssh.Client,
    python: str,
    job_dir: str,
    payload: Payload,
    extra: dict[str, bytes],
    claim_port: int | None = None,
    ahead: Ahead | None = None,
) -> Delivery:
    """Fill job_dir (relative to home) on the host: work/ from payload, the extra files beside it.

    claim_port (the master's): the host first takes this job's hold on the master port (onhost/receive.py);
    BadInput when another gpuprov job on that host holds it. ahead: the same host's store() started
    beside preflight; its channel is used when it ran with python.

    One command (receive.py) per host: the files its store lacks (store(), unless ahead did it), then one
    exchange that makes the job's directory from the store and the extra files. The channel stays open;
    Delivery.start() starts the job on it.
    """
    stored = ahead.take(python) if ahead is not None else None
    if stored is None:
        if ahead is not None:
            console.detail(f"{host}: the push begun beside preflight did not serve ({ahead.failure}); again")
        stored = store(host, client, receive_command(python), payload)
    channel = stored.channel
    job: dict[str, object] = {
        "job_dir": job_dir,
        "links": [[f.sha256, f.rel] for f in payload.files],
        "extra": [[name, len(data)] for name, data in extra.items()],
    }
    if claim_port is not None:  # the master: receive.py holds the port for this job until it ends
        job["claim"] = claim_port
    try:
        channel.send(json.dumps(job).encode() + b"\n")
        for data in extra.values():
            channel.send(data)
        done = json.loads(channel.readline() or b"null")
        if not isinstance(done, dict) or not done.get("ok"):
            answer = _why(channel)
            if answer.startswith("master port "):  # another job holds it: as preflight's "in use", bad input
                raise BadInput(f"{host}: {answer}; nothing was started")
            raise GpuprovError(f"{host}: cannot create ~/{job_dir}: {answer}")
    except (ssh.SessionLost, ValueError) as exc:
        channel.close()
        why = exc.cause if isinstance(exc, ssh.SessionLost) else exc
        raise GpuprovError(f"{host}: copying the job's files failed: {why}") from None
    except BaseException:
        channel.close()
        raise
    return Delivery(host, channel, stored.stats)


def _why(channel: ssh.Channel) -> str:
    """receive.py's last line on stderr (it exits after a problem)."""
    try:
        text = channel.read_stderr().decode(errors="replace").strip()
    except ssh.SessionLost:
        text = ""
    channel.close()
    return (text.splitlines() or ["no answer"])[-1]
