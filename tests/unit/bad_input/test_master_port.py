"""The master port: refused when something listens on it, never because of TIME_WAIT (issue 28, item 9).

Preflight's bind test (gpuprov.onhost.sockets.bind_first, in probe.py's `listen` on the master) must
answer what torch's TCPStore server will meet when it binds the port: TCPStore sets SO_REUSEADDR before
bind (torch/csrc/distributed/c10d/socket.cpp, SocketListenOp::tryListen -> enableAddressReuse), so a
port whose last connections are only in TIME_WAIT (a job that just ended) is free for it, and a port
something listens on is not, whatever that listener set. What torchrun is given so that a second job on a
port already taken cannot join the first job's rendezvous is in tests/unit/launch/test_render.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuprov import onhost
from gpuprov.onhost import receive, sockets
from gpuprov.onhost.sockets import bind_first
from tests.unit.launch.test_receive import JOB_DIR, send_job, start_receive, store_files


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _leave_time_wait(port: int, connections: int) -> None:
    """Connections to a listener on port that the listener's side closes first: each leaves a TIME_WAIT
    socket on port (the side that closes first waits), as a finished job's rendezvous server does."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", port))
        server.listen()
        for _ in range(connections):
            client = socket.create_connection(("127.0.0.1", port))
            conn, _ = server.accept()
            conn.close()  # the server's side first: TIME_WAIT is on port
            client.recv(1)
            client.close()


@pytest.mark.parametrize("connections", [1, 5])
def test_a_port_in_time_wait_is_free(connections: int) -> None:
    port = _free_port()
    _leave_time_wait(port, connections)
    sock = bind_first([port])
    assert sock is not None, f"port {port}, with only TIME_WAIT sockets, was refused"
    assert sock.getsockname()[1] == port
    sock.close()


@contextlib.contextmanager
def _listener(address: str, port: int, reuse: bool) -> Iterator[None]:
    with socket.socket() as holder:
        if reuse:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((address, port))
        holder.listen()
        yield


HOLDERS: dict[str, Callable[[int], contextlib.AbstractContextManager[None]]] = {
    "any-address": lambda port: _listener("0.0.0.0", port, False),
    "any-address-reuseaddr": lambda port: _listener("0.0.0.0", port, True),
    "loopback-reuseaddr": lambda port: _listener("127.0.0.1", port, True),
}


@pytest.mark.parametrize("holder", HOLDERS)
def test_a_port_something_listens_on_is_busy(holder: str) -> None:
    port = _free_port()
    with HOLDERS[holder](port):
        assert bind_first([port]) is None
        other = bind_first([port, 0])  # the search goes on to the next port
        assert other is not None and other.getsockname()[1] != port
        other.close()


def test_a_port_two_bind_tests_bound_at_once_goes_to_the_first_that_listens() -> None:
    """With SO_REUSEADDR, two sockets can bind a port that nothing listens on yet (two preflights at once);
    the later listen() fails: that port is busy, not a crash."""
    port = _free_port()
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("0.0.0.0", port))  # bound, not listening: bind_first's bind succeeds too
        real_listen = socket.socket.listen

        def listen_after_the_other(self: socket.socket, backlog: int = 0) -> None:
            if self is not other and self.getsockname()[1] == port:
                real_listen(other)  # the other preflight listens first
            real_listen(self, backlog)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(socket.socket, "listen", listen_after_the_other)
            assert bind_first([port]) is None


# ----- two launches at once: the master's receive.py holds the port until the job has ended ---------------


def _lock_path(port: int) -> Path:
    return Path(receive.CLAIM_PATH.format(port))


def _held(port: int) -> bool:
    """Whether some process holds the port's lock (this one tries it and lets go)."""
    fd = os.open(_lock_path(port), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _push(
    home: Path, port: int, extra: dict[str, bytes] | None = None, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], object]:
    """receive.py as the launch on the master runs it, up to the answer to its job (the port then held,
    or the refusal); that answer (None after a refusal)."""
    proc = start_receive(home, env)
    store_files(proc, {})
    send_job(proc, {}, extra or {}, claim=port)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline() or b"null")


@pytest.fixture
def port() -> Iterator[int]:
    number = _free_port()
    yield number
    with contextlib.suppress(FileNotFoundError):
        _lock_path(number).unlink()


def test_a_second_launch_cannot_take_a_held_master_port(tmp_path: Path, port: int) -> None:
    first, _ = _push(tmp_path / "a", port)
    assert _held(port)
    for home in ("b", "c"):  # each later launch, while the first holds the port
        second, refused = _push(tmp_path / home, port)
        assert refused is None
        assert second.wait(timeout=30) == 1
        assert second.stderr is not None
        err = second.stderr.read().decode().strip().splitlines()
        holder = f"job {JOB_DIR.rsplit('/', 1)[-1]} of user {pwd.getpwuid(os.getuid()).pw_name}"
        assert err == [
            f"master port {port} is taken by {holder}, another gpuprov job starting or running on this host "
            f"(it holds {_lock_path(port)}); wait for it to end or choose another --master-port"
        ]
        assert not (tmp_path / home / JOB_DIR).exists()  # nothing written
    assert first.stdin is not None
    first.stdin.close()  # the first launch gives up before starting: the port is free again
    assert first.wait(timeout=30) == 0
    assert not _held(port)
    third, _ = _push(tmp_path / "d", port)
    assert _held(port)
    assert third.stdin is not None
    third.stdin.close()
    assert third.wait(timeout=30) == 0


def test_the_port_is_held_until_the_job_has_ended(tmp_path: Path, port: int) -> None:
    """Detached: receive.py becomes `agent.py start`, which returns; the agent's supervisor keeps the lock
    while run.sh runs, and lets go when it ends. The job's own processes do not inherit it."""
    go = tmp_path / "go"
    run_sh = f"ls -l /proc/$$/fd > {tmp_path}/fds; while [ ! -e {go} ]; do sleep 0.05; done\n"
    extra = {
        "agent.py": onhost.path("agent.py").read_bytes(), "run.sh": run_sh.encode(),
        "job_id": b"20250101-120000-abcd", "grace": b"5",
    }  # fmt: skip
    proc, done = _push(tmp_path, port, extra)
    assert proc.stdin is not None and done == {"ok": True}
    proc.stdin.write(b"start\n")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert _held(port)  # by the supervisor, the launching process having exited
    deadline = time.monotonic() + 10
    while not (tmp_path / "fds").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert str(_lock_path(port)) not in (tmp_path / "fds").read_text()
    go.touch()
    while _held(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _held(port)


def test_a_controller_that_never_says_start_does_not_hold_the_port(tmp_path: Path, port: int) -> None:
    """A laptop that sleeps mid-push keeps the SSH channel open without a word: the master gives up after
    its deadline (START_WAIT_S, shortened here), starts nothing, and the port is free again."""
    assert receive.START_WAIT_S >= 10 * 60  # the push of every host must fit in it
    proc, done = _push(tmp_path, port, env={receive.START_WAIT_ENV: "1"})
    assert proc.stderr is not None
    assert done == {"ok": True}
    assert _held(port)
    assert proc.wait(timeout=30) == 1  # stdin still open: only the deadline ends it
    assert "no attach/start from the controller within 1 s" in proc.stderr.read().decode()
    assert not _held(port)


def test_a_lock_file_whose_text_is_not_its_holders_names_no_job(tmp_path: Path, port: int) -> None:
    """Another user's leftover lock file cannot be written by the next holder, so its text may be an ended
    job's: it is shown only when written by the process that took the lock now held (/proc/locks)."""
    _lock_path(port).write_text("999999999 20240101-000000-stale\n")
    fd = os.open(_lock_path(port), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held by this test's process, which never wrote the text
        proc, _ = _push(tmp_path, port)
        assert proc.wait(timeout=30) == 1
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        assert f"master port {port} is taken by another gpuprov job" in err and "stale" not in err, err
    finally:
        os.close(fd)


def _proc_locks_keeps_a_gone_takers_pid(tmp_path: Path) -> bool:
    """Whether /proc/locks here names the process that took a flock after it exited and its child kept the
    lock (as a detached job's supervisor keeps the port's). The root pid namespace does; a container's (the
    newest-Ansible lane runs in one) can show another number, and the refusal then names no job."""
    lock = tmp_path / "probe.lock"
    lock.touch()
    script = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "if os.fork() == 0:\n"
        "    os.close(1); os.close(2); time.sleep(3); os._exit(0)\n"
        "print(os.getpid(), flush=True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(lock)], capture_output=True, text=True, timeout=10
    )
    fd = os.open(lock, os.O_RDONLY)
    try:
        return str(receive._flock_taker(fd)) == out.stdout.strip()  # receive.py's own reading
    finally:
        os.close(fd)


def test_a_detached_jobs_holder_is_named_after_its_launch_exited(tmp_path: Path, port: int) -> None:
    if not _proc_locks_keeps_a_gone_takers_pid(tmp_path):
        pytest.skip("/proc/locks here does not name a flock's taker once it exited (a pid namespace)")
    go = tmp_path / "go"
    extra = {
        "agent.py": onhost.path("agent.py").read_bytes(),
        "run.sh": f"while [ ! -e {go} ]; do sleep 0.05; done\n".encode(),
        "job_id": b"20250101-000000-abcd", "grace": b"5",
    }  # fmt: skip
    proc, done = _push(tmp_path / "a", port, extra)
    assert proc.stdin is not None and done == {"ok": True}
    proc.stdin.write(b"start\n")
    proc.stdin.close()
    try:
        assert proc.wait(timeout=30) == 0  # the supervisor holds the lock now
        second, _ = _push(tmp_path / "b", port)
        assert second.wait(timeout=30) == 1 and second.stderr is not None
        assert "is taken by job 20250101-000000-abcd of user " in second.stderr.read().decode()
    finally:
        go.touch()
    deadline = time.monotonic() + 10
    while _held(port) and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_link_in_place_of_the_lock_is_not_followed(tmp_path: Path, port: int) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    _lock_path(port).symlink_to(target)
    proc, _ = _push(tmp_path, port)
    assert proc.wait(timeout=30) == 1
    assert proc.stderr is not None
    assert f"cannot claim master port {port}: {_lock_path(port)}: " in proc.stderr.read().decode()


def test_preflight_counts_a_held_port_as_busy(tmp_path: Path, port: int) -> None:
    """Preflight's bind test (probe.py's listen on the master) skips a port a launch holds, so a second
    launch is refused there (--master-port) or gets the next free port (without it)."""
    assert sockets.CLAIM_PATH == receive.CLAIM_PATH
    first, _ = _push(tmp_path, port)
    assert bind_first([port]) is None
    other = bind_first([port, 0])
    assert other is not None and other.getsockname()[1] != port
    other.close()
    assert first.stdin is not None
    first.stdin.close()
    assert first.wait(timeout=30) == 0
    sock = bind_first([port])
    assert sock is not None
    sock.close()
