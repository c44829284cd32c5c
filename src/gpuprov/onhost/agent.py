"""The remote half of `gpuprov launch`: copied into each job's directory on every host and run there.

Standard library only (it runs with the job's Python env on the host, any Python >= 3.8). Commands:

    agent.py start JOBDIR            start the job (run.sh) in its own session; print its process group id
    agent.py attach JOBDIR           start, then stream the log until the job exits; stdin closing (the
                                     client went away or asked for teardown) stops the job
    agent.py follow JOBDIR [OFFSET]  stream the log from byte OFFSET until the job exits
    agent.py stop JOBDIR GRACE       SIGTERM to every process of the job, SIGKILL after GRACE seconds
    agent.py status JOBDIR           one JSON line: state, exit code, pgid

Layout of JOBDIR: run.sh (the rendered torchrun command), job_id, job.log (torchrun's output), pgid,
exit_code (written when the job ends; 128+N for a signal N), ranks/ (torchrun's per-rank logs); with
`--image`, container (the container's name, then the engine's command, one word a line: run.sh writes it).

A job in a container is also its container: stop removes it by name, whether run.sh's own trap could or not
(run.sh killed, or an engine whose container outlives its client, such as Podman's under conmon).

A job's processes are: its process group (run.sh execs torchrun, the group leader), every descendant of
those (torchrun starts each worker in a session of its own), and any process of this user whose
environment carries GPUPROV_JOB_ID=<this job> (orphans). Nothing is ever matched by command name, so
another job on the same host is never touched.

Events for the client go to stderr as lines starting with EVENT_PREFIX; the job's output goes to stdout.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

EVENT_PREFIX = "@gpuprov "
POLL_S = 0.05
START_TIMEOUT_S = 10.0
# `ENGINE rm -f` of the job's container: where the engine stores images with vfs (a site's choice), it
# deletes the container's whole copy of the image (over 10 s for a 1.19 GB image on a loaded machine; under
# a second with overlay2); the host's "exit" waits for it, so that when the client hears it nothing of the
# job is left.
REMOVE_TIMEOUT_S = 60.0


def _path(jobdir: str, name: str) -> str:
    return os.path.join(jobdir, name)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _open_private(path: str, mode: str) -> IO[Any]:
    """Open for writing a file that only the user can read (the log can carry the job's environment)."""
    flags = os.O_CREAT | (os.O_RDWR if "+" in mode else os.O_WRONLY)
    flags |= os.O_APPEND if mode.startswith("a") else os.O_TRUNC
    return os.fdopen(os.open(path, flags, 0o600), mode)


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with _open_private(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _event(text: str) -> None:
    try:
        sys.stderr.write(EVENT_PREFIX + text + "\n")
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        pass


# ----- start / supervise ---------------------------------------------------------------------------------


def start(jobdir: str) -> int:
    """Start the job once; return its process group id (also when it was already started)."""
    pgid = _read(_path(jobdir, "pgid"))
    if pgid:
        return int(pgid)
    _fork_supervisor(jobdir)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        pgid = _read(_path(jobdir, "pgid"))
        if pgid:
            return int(pgid)
        time.sleep(0.01)
    raise SystemExit(f"the job in {jobdir} did not start within {START_TIMEOUT_S:.0f} s")


def _fork_supervisor(jobdir: str) -> None:
    """Run supervise() in a child: a session of its own (so the SSH session ending does not touch it),
    none of the channel's descriptors, outliving the job just long enough to record its exit code.

    A fork of this process, not a new interpreter: that start cost each host about 0.03 CPU seconds
    before the job started. Called before any thread of this process starts.
    """
    if os.fork():
        return
    code = 1
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        claim = os.environ.get("GPUPROV_CLAIM_FD")  # the master port's lock (receive.py): held to the end
        for name in os.listdir("/proc/self/fd"):
            if int(name) > 2 and name != claim:
                with contextlib.suppress(OSError):
                    os.close(int(name))
        supervise(jobdir)
        code = 0
    finally:
        os._exit(code)  # nothing of the parent's (buffers, atexit) runs twice


def supervise(jobdir: str) -> None:
    job_id = _read(_path(jobdir, "job_id")) or ""
    env = dict(os.environ)
    env.pop("GPUPROV_CLAIM_FD", None)  # the job's processes do not inherit the lock (Popen closes it)
    env["GPUPROV_JOB_ID"] = job_id
    with _open_private(_path(jobdir, "job.log"), "ab") as log, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            ["bash", _path(jobdir, "run.sh")],
            stdin=devnull,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=jobdir,
            start_new_session=True,  # its own session and process group: pgid == pid
        )
    _write_atomic(_path(jobdir, "pgid"), str(proc.pid))
    code = proc.wait()
    if code < 0:
        code = 128 - code
    _write_atomic(_path(jobdir, "exit_code"), str(code))


# ----- follow --------------------------------------------------------------------------------------------


class _Output:
    """stdout that stops writing (instead of dying) when the client has gone."""

    def __init__(self) -> None:
        self.alive = True

    def write(self, data: bytes) -> None:
        if not self.alive or not data:
            return
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except (BrokenPipeError, OSError):
            self.alive = False


def follow(jobdir: str, offset: int, out: _Output, announce: bool = True) -> int:
    """Copy job.log from offset to stdout until the job has exited and the log is drained."""
    log_path = _path(jobdir, "job.log")
    while not os.path.exists(log_path):
        if os.path.exists(_path(jobdir, "exit_code")):
            break
        time.sleep(POLL_S)
    pending = b""
    with _open_private(log_path, "ab+") as log:
        log.seek(offset)
        while True:
            exited = os.path.exists(_path(jobdir, "exit_code"))
            chunk = log.read(1 << 16)
            if chunk:
                data = pending + chunk
                cut = data.rfind(b"\n") + 1
                out.write(data[:cut])
                pending = data[cut:]
                continue
            if exited:
                out.write(pending + (b"\n" if pending else b""))
                break
            time.sleep(POLL_S)
    code = int(_read(_path(jobdir, "exit_code")) or "1")
    if announce:
        _event(f"exit {code}")
    return code


def attach(jobdir: str) -> int:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a dropped connection is handled through stdin
    out = _Output()
    pgid = start(jobdir)
    _event(f"pgid {pgid}")
    grace = float(_read(_path(jobdir, "grace")) or "5")
    stop_done = threading.Event()
    stop_started = threading.Event()

    def watch_stdin() -> None:
        # The client never writes; EOF means it asked for teardown, or it went away (connection lost).
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except OSError:
            pass
        if not os.path.exists(_path(jobdir, "exit_code")):
            stop_started.set()
            stop(jobdir, grace)
        stop_done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    code = follow(jobdir, 0, out, announce=False)
    if stop_started.is_set():
        stop_done.wait(grace + 10 + REMOVE_TIMEOUT_S)  # what stop() may take, rm included
    elif job_processes(jobdir):
        # torchrun ended but something of the job is still there (a worker it lost track of): end it too,
        # so that when the client hears "exit", nothing of the job is left on this host.
        stop(jobdir, grace)
    else:
        remove_container(jobdir)  # run.sh's trap removed it; this covers a run.sh that was killed
    _event(f"exit {code}")
    return code


# ----- stop ----------------------------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, pgid, state) for this user's live (non-zombie) processes."""
    table = {}
    uid = os.getuid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat("/proc/" + name).st_uid != uid:
                continue
            with open("/proc/" + name + "/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
        if state in ("Z", "X"):
            continue
        table[int(name)] = (ppid, pgrp, state)
    return table


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def job_processes(jobdir: str) -> set[int]:
    pgid = int(_read(_path(jobdir, "pgid")) or "0")
    job_id = _read(_path(jobdir, "job_id")) or ""
    marker = b"GPUPROV_JOB_ID=" + job_id.encode()
    table = _proc_table()
    found = {pid for pid, (_, pgrp, _) in table.items() if pgid and pgrp == pgid}
    if job_id:
        found |= {pid for pid in table if _has_marker(pid, marker)}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.discard(os.getpid())
    return found


def _signal_all(pids: set[int], sig: int) -> None:
    """Send sig to each of these processes once.

    A process group the job's processes lead goes by killpg (that also reaches a child forked a moment
    ago), every other process by its pid, and never both: a second SIGTERM reaching torchrun while it
    shuts its workers down interrupts that shutdown (its handler raises again), which makes it slower.
    """
    table = _proc_table()
    groups = {pid for pid in pids if table.get(pid, (0, 0, ""))[1] == pid and pid != os.getpgrp()}
    for pgrp in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgrp, sig)
    for pid in pids:
        if pid in table and table[pid][1] not in groups:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)


def stop(jobdir: str, grace: float) -> dict[str, int]:
    """Terminate every process of the job; return how many got SIGTERM and how many needed SIGKILL."""
    pids = job_processes(jobdir)
    termed = len(pids)
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(POLL_S)
        pids = job_processes(jobdir)
    killed = len(pids)
    for _ in range(40):
        if not pids:
            break
        _signal_all(pids, signal.SIGKILL)
        time.sleep(POLL_S)
        pids = job_processes(jobdir)
    remove_container(jobdir)
    return {"terminated": termed, "killed": killed, "left": len(pids)}


def remove_container(jobdir: str) -> bool:
    """Remove the job's container by name (`ENGINE rm -f NAME`); False when the job has none."""
    words = (_read(_path(jobdir, "container")) or "").splitlines()
    if len(words) < 2:
        return False
    name, engine = words[0], words[1:]
    deadline = time.monotonic() + REMOVE_TIMEOUT_S
    with open(os.devnull, "wb") as devnull:
        try:
            subprocess.call(
                [*engine, "rm", "-f", name], stdout=devnull, stderr=devnull, timeout=REMOVE_TIMEOUT_S
            )
            # Podman's --rm cleanup (conmon's `podman container cleanup --rm`) may hold the container while
            # it deletes its storage: `rm -f` then returns at once. Wait until the engine lists it no more.
            while time.monotonic() < deadline and _container_listed(engine, name):
                time.sleep(0.5)
                subprocess.call([*engine, "rm", "-f", name], stdout=devnull, stderr=devnull, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return True


def _container_listed(engine: list[str], name: str) -> bool:
    listed = subprocess.run(
        [*engine, "ps", "-a", "--filter", "name=^" + name + "$", "--format", "{{.Names}}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        timeout=30,
    )
    return name in listed.stdout.decode(errors="replace").split()


def status(jobdir: str) -> dict[str, object]:
    code = _read(_path(jobdir, "exit_code"))
    pgid = _read(_path(jobdir, "pgid"))
    log = _path(jobdir, "job.log")
    if not os.path.isdir(jobdir):
        state = "missing"
    elif code is not None:
        state = "exited"
    elif pgid is None:
        state = "not started"
    else:
        state = "running" if job_processes(jobdir) else "lost"
    return {
        "state": state,
        "exit_code": int(code) if code is not None else None,
        "pgid": int(pgid) if pgid else None,
        "log_bytes": os.path.getsize(log) if os.path.exists(log) else 0,
    }


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write(__doc__ or "")
        return 2
    command, jobdir = argv[0], os.path.abspath(os.path.expanduser(argv[1]))
    if command == "start":
        print(start(jobdir), flush=True)
        return 0
    if command == "attach":
        attach(jobdir)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # the stdin watcher thread may still block in read(): do not wait for it
    if command == "follow":
        follow(jobdir, int(argv[2]) if len(argv) > 2 else 0, _Output())
        return 0
    if command == "stop":
        print(json.dumps(stop(jobdir, float(argv[2]) if len(argv) > 2 else 5.0)), flush=True)
        return 0
    if command == "status":
        print(json.dumps(status(jobdir)), flush=True)
        return 0
    sys.stderr.write(f"unknown command {command!r}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
