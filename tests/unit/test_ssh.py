"""gpuprov.ssh without a server: fan_out's bounds, timeouts and order; connect's refusals on local ports."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import paramiko
import pytest

from gpuprov import hosts, ssh
from gpuprov.errors import GpuprovError


def test_fan_out_keeps_input_order_and_each_items_error() -> None:
    def fn(n: int) -> int:
        time.sleep(0.01 * (5 - n))  # later items finish first
        if n == 2:
            raise GpuprovError("two is bad")
        return n * 10

    outcomes = ssh.fan_out([0, 1, 2, 3, 4], fn)
    assert [o.item for o in outcomes] == [0, 1, 2, 3, 4]
    assert [o.value for o in outcomes] == [0, 10, None, 30, 40]
    assert [type(o.error).__name__ for o in outcomes] == ["NoneType"] * 2 + ["GpuprovError"] + [
        "NoneType"
    ] * 2
    with pytest.raises(GpuprovError, match="two is bad"):
        ssh.values(outcomes)
    assert ssh.values(outcomes[:2]) == [0, 10]


def test_fan_out_runs_at_most_max_parallel_at_once() -> None:
    lock = threading.Lock()
    now = peak = 0

    def fn(n: int) -> int:
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
        time.sleep(0.05)
        with lock:
            now -= 1
        return n

    assert ssh.values(ssh.fan_out(list(range(12)), fn, max_parallel=3)) == list(range(12))
    assert peak == 3
    assert ssh.values(ssh.fan_out(list(range(4)), fn, max_parallel=1)) == list(range(4))
    assert peak == 3  # unchanged: one at a time
    with pytest.raises(ValueError, match="max_parallel"):
        ssh.fan_out([1], fn, max_parallel=0)


def test_fan_out_runs_in_parallel() -> None:
    started = time.monotonic()
    ssh.fan_out(list(range(8)), lambda n: time.sleep(0.3), max_parallel=8)
    assert time.monotonic() - started < 1.5  # 8 x 0.3 s one after the other would be 2.4 s


def test_fan_out_timeout_is_an_error_for_that_item_only() -> None:
    release = threading.Event()

    def fn(n: int) -> str:
        if n == 1:
            release.wait(10)  # hangs past the timeout
        return f"host{n}"

    started = time.monotonic()
    outcomes = ssh.fan_out([0, 1, 2, 3], fn, max_parallel=2, timeout=0.5)
    elapsed = time.monotonic() - started
    release.set()
    assert elapsed < 3
    assert [o.value for o in outcomes] == ["host0", None, "host2", "host3"]
    assert isinstance(outcomes[1].error, ssh.TimedOut)
    assert outcomes[1].error.message == "no result within 0.5 s"
    assert [o.error for o in outcomes if o.item != 1] == [None, None, None]


def test_fan_out_timeout_counts_from_each_items_start() -> None:
    """With one slot, the last item waits for the others; that wait is not part of its own timeout."""
    outcomes = ssh.fan_out([0.2, 0.2, 0.2], lambda s: time.sleep(s), max_parallel=1, timeout=0.5)
    assert [o.error for o in outcomes] == [None, None, None]


def test_fan_out_passes_on_keyboard_interrupt_from_a_call() -> None:
    """interrupts.check() raises KeyboardInterrupt in a worker (sandbox up): the caller gets it."""

    def fn(n: int) -> int:
        if n == 1:
            raise KeyboardInterrupt
        return n

    outcomes = ssh.fan_out([0, 1, 2], fn)
    assert isinstance(outcomes[1].error, KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        ssh.values(outcomes)


def test_ctrl_c_starts_no_further_call_and_waits_for_the_running_ones() -> None:
    started: list[int] = []
    finished: list[int] = []

    def fn(n: int) -> None:
        started.append(n)
        time.sleep(0.5)
        finished.append(n)

    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        ssh.fan_out(list(range(6)), fn, max_parallel=2)
    assert sorted(started) == [0, 1]  # the first two; no other started after Ctrl-C
    assert sorted(finished) == [0, 1]  # and they were waited for


def test_fan_out_of_nothing() -> None:
    assert ssh.fan_out([], lambda n: n) == []


def local_host(port: int, tmp_path: Path) -> hosts.Host:
    return hosts.Host("node1", "127.0.0.1", port, "u", None, tmp_path / "known_hosts")


def test_connect_to_a_closed_port_is_unreachable(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on (bound, never listening)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        with pytest.raises(ssh.Unreachable) as refused:
            ssh.connect(local_host(port, tmp_path), timeout=2)
    assert refused.value.message == (
        f"node1 (127.0.0.1:{port}): cannot connect over SSH: Unable to connect to port {port} on 127.0.0.1; "
        "is the host up and sshd running?"
    )
    assert ssh.without_label(refused.value, local_host(port, tmp_path)).startswith("cannot connect over SSH")


def test_connect_refuses_a_missing_key_file(tmp_path: Path) -> None:
    host = hosts.Host("node1", "127.0.0.1", 22, "u", tmp_path / "gone", tmp_path / "known_hosts")
    with pytest.raises(
        GpuprovError, match=r"node1: SSH key .*/gone \(ansible_ssh_private_key_file\) does not"
    ):
        ssh.connect(host)


def test_known_hosts_name() -> None:
    host = hosts.Host("n", "10.0.0.5", 22, "u", None, Path("/k"))
    assert ssh.known_hosts_name(host) == "10.0.0.5"
    assert ssh.known_hosts_name(hosts.Host("n", "10.0.0.5", 2222, "u", None, Path("/k"))) == "[10.0.0.5]:2222"


def test_run_on_a_closed_session_is_session_lost() -> None:
    client = paramiko.SSHClient()  # never connected: no transport, as after close()
    with pytest.raises(ssh.SessionLost) as lost:
        ssh.run(client, "true")
    assert lost.value.message == "SSH command failed (EOFError: the connection is closed)"
    assert isinstance(lost.value.cause, EOFError)


def _serve_once(reply: bytes) -> tuple[socket.socket, int]:
    """A local listener that answers its first connection with reply, then closes it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(reply)

    threading.Thread(target=answer, daemon=True).start()
    return server, server.getsockname()[1]


def test_connect_to_a_server_that_is_not_sshd_is_unreachable(tmp_path: Path) -> None:
    server, port = _serve_once(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    with server, pytest.raises(ssh.Unreachable) as refused:
        ssh.connect(local_host(port, tmp_path), timeout=5)
    assert refused.value.message == (
        f"node1 (127.0.0.1:{port}): something answers on port {port} but it is not an SSH server "
        "(no SSH banner); check ansible_host and ansible_port"
    )


def test_open_channel_on_a_closed_session_is_session_lost() -> None:
    with pytest.raises(ssh.SessionLost) as lost:
        ssh.open_channel(paramiko.SSHClient(), "true")
    assert lost.value.message == "SSH command failed (EOFError: the connection is closed)"
    with pytest.raises(ssh.SessionLost, match="EOFError: the connection is closed"):
        ssh.open_sftp(paramiko.SSHClient())


class RefusingTransport:
    """paramiko's Transport surface where sshd refuses `refusals` sessions first (MaxSessions reached)."""

    def __init__(self, refusals: int, code: int = paramiko.common.OPEN_FAILED_CONNECT_FAILED) -> None:
        self.refusals = refusals
        self.code = code
        self.asked = 0

    def is_active(self) -> bool:
        return True

    def open_session(self, timeout: float | None = None) -> Any:
        self.asked += 1
        if self.asked <= self.refusals:
            raise paramiko.ChannelException(self.code, "Connect failed")
        return OpenedSession()


class OpenedSession:
    """paramiko's Channel surface as far as open_channel uses it."""

    def settimeout(self, timeout: float | None) -> None:
        pass

    def exec_command(self, command: str) -> None:
        pass


class WithTransport(paramiko.SSHClient):
    def __init__(self, transport: RefusingTransport) -> None:
        super().__init__()
        self.fake = transport

    def get_transport(self) -> Any:
        return self.fake


def test_a_session_refused_while_a_closed_one_is_freed_is_asked_for_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """sshd (MaxSessions) frees a closed session's slot once its command has exited: an open refused as
    "Connect failed" is tried again for a moment; any other refusal, or one that lasts, is SessionLost."""
    monkeypatch.setattr(ssh, "SESSION_RETRY_PAUSES_S", (0.0, 0.0, 0.0))
    freed = RefusingTransport(refusals=2)
    ssh.open_channel(WithTransport(freed), "true")
    assert freed.asked == 3
    lasting = RefusingTransport(refusals=10)
    with pytest.raises(ssh.SessionLost, match="Connect failed"):
        ssh.open_channel(WithTransport(lasting), "true")
    assert lasting.asked == 4
    prohibited = RefusingTransport(refusals=1, code=paramiko.common.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED)
    with pytest.raises(ssh.SessionLost):
        ssh.open_channel(WithTransport(prohibited), "true")
    assert prohibited.asked == 1


class BrokenChannel:
    """paramiko's Channel surface, every call failing as a broken session makes it fail."""

    closed = False

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def _fail(self, *args: object) -> None:
        raise self.error

    sendall = shutdown_write = recv_exit_status = makefile = makefile_stderr = _fail


@pytest.mark.parametrize(
    "error",
    [
        paramiko.SSHException("Channel closed."),
        TimeoutError("timed out"),
        EOFError(),
        OSError("Socket is closed"),
    ],
    ids=["paramiko", "read-timeout", "eof", "socket"],
)
def test_every_channel_failure_is_session_lost_with_its_cause(error: BaseException) -> None:
    channel = ssh.Channel(BrokenChannel(error))
    calls = [
        lambda: channel.send(b"x"),
        channel.shutdown_write,
        channel.readline,
        channel.read,
        channel.read_stderr,
        channel.exit_status,
        lambda: list(channel.lines()),
        lambda: list(channel.stderr_lines()),
    ]
    for call in calls:
        with pytest.raises(ssh.SessionLost) as lost:
            call()
        assert lost.value.cause is error
        # The cause's own text, as before; where it has none (a bare EOFError), what it means (issue 28).
        assert lost.value.message == (str(error) or "the connection was closed")


def test_a_channel_streams_lines_and_its_exit_status() -> None:
    class Raw:
        closed = False

        def __init__(self) -> None:
            self.sent = b""

        def makefile(self, mode: str) -> io.BytesIO:
            return io.BytesIO(b"one\ntwo\n")

        def makefile_stderr(self, mode: str) -> io.BytesIO:
            return io.BytesIO(b"@gpuprov exit 0\n")

        def sendall(self, data: bytes) -> None:
            self.sent += data

        def recv_exit_status(self) -> int:
            return 3

    raw = Raw()
    channel = ssh.Channel(raw)
    channel.send(b"go\n")
    assert raw.sent == b"go\n"
    assert list(channel.lines()) == [b"one\n", b"two\n"]
    assert channel.readline() == b""
    assert list(channel.stderr_lines()) == [b"@gpuprov exit 0\n"]
    assert channel.exit_status() == 3


def test_a_file_copy_on_a_broken_session_is_session_lost(tmp_path: Path) -> None:
    class BrokenSFTP:
        def put(self, *args: object, **kwargs: object) -> None:
            raise EOFError("lost")

        def open(self, *args: object) -> None:
            raise paramiko.SSHException("Server connection dropped: ")

        get = put

    with pytest.raises(ssh.SessionLost, match=r"^copying .*/a to /r failed: lost$"):
        ssh.put(BrokenSFTP(), tmp_path / "a", "/r")  # type: ignore[arg-type]
    with pytest.raises(ssh.SessionLost, match=r"^writing /r failed: Server connection dropped"):
        ssh.put_bytes(BrokenSFTP(), b"x", "/r")  # type: ignore[arg-type]
    with pytest.raises(ssh.SessionLost, match=r"^copying /r to .*/a failed: lost$"):
        ssh.get(BrokenSFTP(), "/r", tmp_path / "a")  # type: ignore[arg-type]


def test_only_ssh_imports_paramiko_and_only_when_it_connects() -> None:
    """Every module but ssh.py names paramiko nowhere; importing the modules that reach hosts loads none of
    it (the first connect does)."""
    src = Path(ssh.__file__).parent
    naming = sorted(
        str(p.relative_to(src))
        for p in src.rglob("*.py")
        if p.name != "ssh.py" and re.search(r"^\s*(import|from) paramiko", p.read_text(), re.MULTILINE)
    )
    assert naming == []
    script = (
        "import sys\n"
        "import gpuprov.ssh, gpuprov.launch.flow, gpuprov.launch.control, gpuprov.check.ports\n"
        "import gpuprov.check.gather, gpuprov.host_preflight\n"
        "print(sorted(m for m in sys.modules if m.startswith('paramiko')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_an_exit_status_that_does_not_come_in_time_is_session_lost() -> None:
    class Running:
        closed = False
        status_event = threading.Event()  # never set: the command runs on

        def recv_exit_status(self) -> int:
            raise AssertionError("waited without a timeout")

    with pytest.raises(ssh.SessionLost) as lost:
        ssh.Channel(Running()).exit_status(timeout=0.05)
    assert isinstance(lost.value.cause, TimeoutError) and lost.value.message == "no exit status within 0.05 s"
