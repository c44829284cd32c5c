"""gpuprov.ssh without a server: fan_out's bounds, timeouts and order; connect's refusals on local ports."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

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
