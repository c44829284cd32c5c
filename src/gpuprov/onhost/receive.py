"""The receiving end of launch's push: one program per host that fills the job's directory, then starts it.

Standard library only (it runs with the env's Python on the host, any Python >= 3.8), sent as the text of
`python -c` on the one SSH channel that also carries the job afterwards: the push costs each host one
command, started beside preflight's (launch/push.py, Ahead), and starting the agent none of its own.

    python -c <this file> [PYTHON]     PYTHON: the interpreter as the command named it (echoed back)

1. stdin: one JSON line, the store's part: {"files": [[sha256, size, executable], ...]}. The program makes
   the store (~/.gpuprov/files, 0700) and answers on stdout {"python": PYTHON, "missing": [sha256, ...]}.
2. stdin: the bytes of the missing files, back to back in that order; each is checked against its sha256,
   stored beside and renamed (a store file is whole or absent). Answer: {"stored": N}.
3. stdin, once preflight has passed: one JSON line, the job's part: {"job_dir": ".gpuprov/jobs/ID",
   "links": [[sha256, rel], ...], "extra": [[name, size], ...]} (and "claim" on the master, below), then
   the bytes of each extra file. The job's directories are made (0700), the extra files written into
   JOB_DIR (0600: run.sh carries the job's --env values) and each stored file hard-linked into
   JOB_DIR/work under its rel. Answer: {"ok": true}.
4. stdin: one more line: `attach` or `start` runs `agent.py attach|start JOB_DIR` in this same process, on
   the same channel (as `python agent.py` would, without a second interpreter's start: about 0.03 CPU
   seconds per host before the job starts).
End of input before step 3 (preflight failed, or the launch ended) exits 0 having made no job directory;
before step 4, exits without starting anything (so no host starts the job before every host has received
it). No line for step 3 or 4 within START_WAIT_S: exit 1, nothing started (a controller that vanished
mid-launch does not hold the master port for hours). A problem: one line on stderr, exit status 1.

On the master, the job's part also names the job's master port ("claim": PORT): before the job's directory
is made the program takes an exclusive lock on /tmp/gpuprov-master-port-PORT.lock (CLAIM_PATH) and keeps it,
through the agent it becomes and the agent's supervisor (which inherits the descriptor), until the job has
ended. Two gpuprov jobs can never both hold one master port of one host (flock is atomic, so two launches
whose preflights both found the port free cannot both start), and the lock goes with its processes (nothing
stale after a crash). A port the lock shows taken: `master port PORT is taken by ...`, exit status 1, no job
directory made; the holder writes `PID JOB_ID` into the lock file where it owns the file, so the message can
name the job and its user.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import runpy
import select
import stat
import sys
import time
from typing import BinaryIO

STORE_DIR = ".gpuprov/files"
JOBS_DIR = ".gpuprov/jobs"
# In /tmp, shared by every user of the host: one user's job holds the port against the others'. The same
# path as gpuprov.onhost.sockets.CLAIM_PATH, whose bind test counts a held port as busy (a test checks).
CLAIM_PATH = "/tmp/gpuprov-master-port-{}.lock"
CLAIM_RETRY_S = 0.5  # a preflight's bind test may hold the lock for a moment to look at it
CLAIM_FD_ENV = "GPUPROV_CLAIM_FD"  # the lock's descriptor, which the agent's supervisor keeps open
# How long the filled host waits for the controller's `attach`/`start` line. The master holds its port
# meanwhile, so a controller that vanished without closing TCP (a laptop's lid shut mid-push: sshd notices
# only after TCP keepalive's ~2 h) must not hold it longer. The push of every host must fit in it: the
# line comes once the last host has received its files.
START_WAIT_S = 30 * 60
START_WAIT_ENV = "GPUPROV_START_WAIT_S"  # tests only: a shorter wait


def _open_claim(path: str) -> int:
    """The lock file, read-only (flock needs no more), never through a link; made 0644 when new."""
    flags = os.O_RDONLY | os.O_NOFOLLOW
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # another launch made it just now
        return os.open(path, flags)
    os.fchmod(fd, 0o644)  # whatever the umask: other users' launches lock it too
    return fd


def _lock(fd: int) -> bool:
    deadline = time.monotonic() + CLAIM_RETRY_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _flock_taker(fd: int, locks: str = "/proc/locks") -> int | None:
    """The pid that took the flock on fd's file (/proc/locks: `N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE
    ...`). It stays the taker's pid after a detached job's launching process has exited."""
    inode = os.fstat(fd).st_ino
    try:
        with open(locks) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        words = line.split()
        if len(words) > 5 and words[1] == "FLOCK" and words[5].rsplit(":", 1)[-1] == str(inode):
            return int(words[4]) if words[4].isdigit() else None
    return None


def _name_holder(fd: int, path: str, job_dir: str) -> None:
    """Write `PID JOB_ID` into the lock file, where this user owns it, for a refused launch's message. The
    lock is on fd (read-only); this writes through a second descriptor, without O_CREAT (fs.protected_regular)
    and never through a link, and only into the very file locked (not one put at the path since)."""
    try:
        out = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    except OSError:
        return  # another user's file (0644): the message then names no holder
    try:
        locked, opened = os.fstat(fd), os.fstat(out)
        if (locked.st_dev, locked.st_ino) == (opened.st_dev, opened.st_ino):
            os.ftruncate(out, 0)
            os.write(out, f"{os.getpid()} {os.path.basename(job_dir.rstrip('/'))}\n".encode())
    except OSError:
        pass
    finally:
        os.close(out)  # closing another descriptor of the file keeps the flock (unlike fcntl locks)


def _holder(fd: int) -> str:
    """`job JOB_ID of user NAME`, where the lock file names its holder and the name is current: written by
    the process that took the lock now held (another user's leftover file keeps its old, stale text)."""
    taker = _flock_taker(fd)
    try:
        words = os.pread(fd, 200, 0).decode("ascii").split()
        owner = pwd.getpwuid(os.fstat(fd).st_uid).pw_name
    except (OSError, UnicodeDecodeError, KeyError):
        return ""
    if taker is None or len(words) != 2 or words[0] != str(taker):
        return ""
    return f"job {words[1]} of user {owner}"


def claim_master_port(port: int, job_dir: str = "") -> int:
    """Hold the master port for this job (see the module's docstring); the lock's descriptor."""
    path = CLAIM_PATH.format(port)
    try:
        fd = _open_claim(path)
    except OSError as exc:
        raise SystemExit(f"cannot claim master port {port}: {path}: {exc.strerror or exc}") from None
    if not _lock(fd):
        holder = _holder(fd)
        os.close(fd)
        raise SystemExit(
            f"master port {port} is taken by {holder + ', ' if holder else ''}another gpuprov job starting "
            f"or running on this host (it holds {path}); wait for it to end or choose another --master-port"
        ) from None
    if job_dir:
        _name_holder(fd, path, job_dir)
    os.environ[CLAIM_FD_ENV] = str(fd)
    return fd


def _private_dirs(home: str, *rels: str) -> None:
    """Make each folder (under home) with everything above it up to ~/.gpuprov private to the user."""
    os.umask(0o077)
    for rel in rels:
        os.makedirs(os.path.join(home, rel), exist_ok=True)
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):  # from .gpuprov (parts[0]) down; home itself is left alone
            os.chmod(os.path.join(home, *parts[:depth]), 0o700)


def _read_exactly(stream: object, size: int) -> bytes:
    chunks = []
    left = size
    while left:
        chunk = stream.read(min(left, 1 << 20))  # type: ignore[attr-defined]
        if not chunk:
            raise SystemExit("the controller went away in the middle of a file")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_new(path: str, data: bytes, mode: int) -> None:
    """Write beside, then rename: the file at path is whole or not there."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(data)
    os.replace(tmp, path)


def _link(stored: str, work: str, rel: str) -> None:
    target = os.path.join(work, rel)
    if os.path.relpath(os.path.realpath(os.path.dirname(target)), os.path.realpath(work)).startswith(".."):
        raise SystemExit("refusing a file outside the job's work directory: " + rel)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.lexists(target):
        os.unlink(target)
    # Hard links (not symlinks: Python puts a script's real directory on sys.path).
    os.link(stored, target)


def _answer(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def _stored(path: str, size: int) -> bool:
    """Whether the store holds the file: a regular file of its size (one cut short by a crash between the
    write and the disk, renamed without fsync, is sent again)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == size


def store(named: str) -> None:
    """Steps 1 and 2: the files the store lacks, asked for and stored (each whole or absent)."""
    home = os.path.expanduser("~")
    stdin = sys.stdin.buffer
    header = json.loads(stdin.readline())
    _private_dirs(home, STORE_DIR)
    store_dir = os.path.join(home, STORE_DIR)
    missing: list[str] = []
    for sha, size, _ in header["files"]:
        if sha not in missing and not _stored(os.path.join(store_dir, sha), size):
            missing.append(sha)
    _answer({"python": named or sys.executable, "missing": missing})
    sizes = {sha: size for sha, size, _ in header["files"]}
    executable = {sha for sha, _, exe in header["files"] if exe}
    for sha in missing:
        data = _read_exactly(stdin, sizes[sha])
        if hashlib.sha256(data).hexdigest() != sha:
            raise SystemExit("a file arrived damaged (its sha256 differs); launch again")
        _write_new(os.path.join(store_dir, sha), data, 0o700 if sha in executable else 0o600)
    _answer({"stored": len(missing)})


def fill(job: dict[str, object]) -> str:
    """Step 3: the job's directory from the store and the extra files; the job's relative directory."""
    home = os.path.expanduser("~")
    stdin = sys.stdin.buffer
    job_dir = str(job["job_dir"])
    if not job_dir.startswith(JOBS_DIR + "/") or "/" in job_dir[len(JOBS_DIR) + 1 :] or ".." in job_dir:
        raise SystemExit("refusing a job directory outside ~/" + JOBS_DIR + ": " + job_dir)
    if job.get("claim"):
        claim_master_port(int(job["claim"]), job_dir)  # type: ignore[call-overload]
    _private_dirs(home, job_dir + "/work", job_dir + "/ranks")
    for name, size in job["extra"]:  # type: ignore[attr-defined]
        if "/" in name or name.startswith("."):
            raise SystemExit("refusing an extra file name: " + name)
        _write_new(os.path.join(home, job_dir, name), _read_exactly(stdin, size), 0o600)
    store_dir, work = os.path.join(home, STORE_DIR), os.path.join(home, job_dir, "work")
    for sha, rel in job["links"]:  # type: ignore[attr-defined]
        if not os.path.exists(os.path.join(store_dir, sha)):
            raise SystemExit("a file the job needs is not in the store: " + rel)
        _link(os.path.join(store_dir, sha), work, rel)
    _answer({"ok": True})
    return job_dir


def _next_line(stdin: BinaryIO, what: str) -> bytes:
    """The controller's next line (b'' at the end of input), or exit 1 (a held port's lock then goes) when
    none comes in time. select on the descriptor sees it: the controller sends it only after this host's
    last answer, so none of it can sit in stdin's buffer already."""
    wait_s = float(os.environ.get(START_WAIT_ENV) or START_WAIT_S)
    ready, _, _ = select.select([stdin], [], [], wait_s)
    if not ready:
        raise SystemExit(
            f"no {what} from the controller within {wait_s:g} s (did it go away?); nothing started"
        )
    return stdin.readline()


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        sys.stderr.write("usage: python -c <receive.py> [PYTHON_AS_NAMED]\n")
        return 2
    stdin = sys.stdin.buffer
    try:
        store(argv[0] if argv else "")
        line = _next_line(stdin, "job")
        if not line:
            return 0  # end of input: preflight failed or the launch ended; no job directory was made
        job_dir = fill(json.loads(line))
        then = _next_line(stdin, "attach/start").decode().strip()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1
    if then in ("attach", "start"):
        agent = os.path.join(os.path.expanduser("~"), job_dir, "agent.py")
        jobdir = os.path.join(os.path.expanduser("~"), job_dir)
        sys.argv = [agent, then, jobdir]
        sys.path[0] = os.path.dirname(agent)  # as for `python agent.py`
        runpy.run_path(agent, run_name="__main__")  # ends the process (sys.exit or os._exit)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
