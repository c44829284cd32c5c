"""How many SSH round trips a launch costs each host, counted on a fake connection whose channels run their
commands in a local shell (the "host" is this machine, its home a temporary folder, its torch a stand-in).

A channel is one round trip (open and exec, then its answers); a command run and waited for is another.
The issue's target: one connection per host, preflight in one command (the master's port check and each
worker's test connection to it on the same channel), the push in one command with one exchange, and the
agent started on the push's channel with no command of its own.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from gpuprov import hosts, ssh
from gpuprov.launch import preflight, push
from gpuprov.launch.options import Nproc
from tests.unit.launch.test_probe import _torch


class LocalChannel:
    """A paramiko Channel's surface, over `bash -c command` on this machine."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            ["bash", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.closed = False

    def settimeout(self, timeout: float | None) -> None:
        pass

    def makefile(self, mode: str) -> IO[bytes]:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def makefile_stderr(self, mode: str) -> IO[bytes]:
        assert self.proc.stderr is not None
        return self.proc.stderr

    def sendall(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def shutdown_write(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.shutdown_write()
            self.proc.wait(timeout=30)


class Client(str):
    """The fake connection: its host's name."""

    def close(self) -> None:
        pass


class Counting:
    """ssh.connect, ssh.open_channel and ssh.run, each host's calls counted, its commands run locally."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.connections: Counter[str] = Counter()
        self.round_trips: Counter[str] = Counter()
        self.channels: list[LocalChannel] = []
        self.opened: list[tuple[str, str]] = []  # (host, command) in the order the channels opened

    def connect(self, host: hosts.Host, timeout: float = 0) -> Any:
        self.connections[host.name] += 1
        return Client(host.name)

    def open_channel(self, client: Any, command: str, **_: Any) -> Any:
        self.round_trips[client] += 1
        self.opened.append((str(client), command))
        channel = LocalChannel(command, self.env)
        self.channels.append(channel)
        return ssh.Channel(channel)

    def run(self, client: Any, command: str, timeout: float = 60, stdin: bytes | None = None) -> ssh.Result:
        self.round_trips[client] += 1
        proc = subprocess.run(["bash", "-c", command], input=stdin, capture_output=True, env=self.env)
        return ssh.Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def _fake_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Counting:
    """ssh's connect, open_channel and run replaced by Counting: every host is this machine, its home
    tmp_path/home, its torch a stand-in."""
    site = _torch(tmp_path / "site")
    env = {"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(site),
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    (tmp_path / "home").mkdir()
    fake = Counting(env)
    for name in ("connect", "open_channel", "run"):
        monkeypatch.setattr(ssh, name, getattr(fake, name))
    return fake


@pytest.mark.parametrize("imported_before", [False, True], ids=["first-launch", "env-unchanged"])
def test_each_host_costs_one_connection_and_two_round_trips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, imported_before: bool
) -> None:
    fake = _fake_hosts(tmp_path, monkeypatch)
    names = ["node1", "node2", "node3"]
    selected = [
        hosts.Host(n, "127.0.0.1", 22, "u", None, tmp_path / "kh", vars={"gpuprov_python": sys.executable})
        for n in names
    ]
    if imported_before:  # an earlier launch imported this torch: preflight skips the import
        preflight.run(selected[:1], "127.0.0.1", None, Nproc("auto")).close()
        fake.connections.clear()
        fake.round_trips.clear()

    checks = preflight.run(selected, "127.0.0.1", None, Nproc("auto"))
    assert [c.torch for c in checks.checks] == ["2.13.0+cpu"] * 3 and checks.master_port
    # Preflight: each host's checks in one command, on whose channel the master then listens and every
    # other host connects to it.
    assert fake.round_trips == {"node1": 1, "node2": 1, "node3": 1}

    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    payload = push.collect(script, None, include_large=False, max_file_mb=10)
    job_dir = ".gpuprov/jobs/20250101-000000-abcd"
    for check in checks.checks:
        delivery = push.push(check.host.name, check.client, check.python, job_dir, payload, {"job_id": b"x"})
        delivery.cancel()  # end of input: receive.py exits without starting (its start needs no command)
    assert fake.connections == {n: 1 for n in names}
    assert fake.round_trips == {"node1": 2, "node2": 2, "node3": 2}
    assert (tmp_path / "home" / job_dir / "work" / "train.py").read_text() == "print('hi')\n"
    for channel in fake.channels:
        channel.close()


def _pushes_ahead(
    tmp_path: Path, python: str
) -> tuple[push.Payload, dict[str, push.Ahead], Callable[[preflight.HostCheck], None]]:
    """A one-script payload, and the preflight callback that starts each host's push with python, the
    pushes it started."""
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    payload = push.collect(script, None, include_large=False, max_file_mb=10)
    ahead: dict[str, push.Ahead] = {}

    def start_push(check: preflight.HostCheck) -> None:
        ahead[check.host.name] = push.Ahead(check.host.name, check.client, f"py={python}", payload)

    return payload, ahead, start_push


@pytest.mark.parametrize("guessed_right", [True, False], ids=["same-python", "other-python"])
def test_the_push_started_beside_preflight_costs_no_round_trip_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guessed_right: bool
) -> None:
    """The push's channel opens while preflight checks the host (its files stored meanwhile); after
    preflight only the job's part goes on it. Where its python is not the one preflight found, the push
    starts over on a channel of its own, and the job's files are all there either way."""
    fake = _fake_hosts(tmp_path, monkeypatch)
    other = tmp_path / "python-by-another-name"
    other.symlink_to(sys.executable)
    guess = sys.executable if guessed_right else str(other)
    names = ["node1", "node2"]
    selected = [
        hosts.Host(n, "127.0.0.1", 22, "u", None, tmp_path / "kh", vars={"gpuprov_python": sys.executable})
        for n in names
    ]
    payload, ahead, start_push = _pushes_ahead(tmp_path, guess)
    checks = preflight.run(selected, "127.0.0.1", None, Nproc("auto"), connected=start_push)
    assert fake.round_trips == {"node1": 2, "node2": 2}  # each host's checks and its push, side by side
    for name in names:  # the check's channel first: where sshd allows one session, the push is refused
        first, second = [command for host, command in fake.opened if host == name]
        assert "@@gpuprov fact" in first and "receive" in second
    job_dir = ".gpuprov/jobs/20250101-000000-abcd"
    for check in checks.checks:
        name = check.host.name
        push.push(
            name, check.client, check.python, job_dir, payload, {"job_id": b"x"}, ahead=ahead[name]
        ).cancel()
    after = 2 if guessed_right else 3
    assert fake.round_trips == {"node1": after, "node2": after}
    assert (tmp_path / "home" / job_dir / "work" / "train.py").read_text() == "print('hi')\n"
    for channel in fake.channels:
        channel.close()


def test_a_failed_preflight_leaves_the_push_started_beside_it_without_a_job_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_hosts(tmp_path, monkeypatch)
    home = tmp_path / "home"
    selected = [
        hosts.Host(
            "node1", "127.0.0.1", 22, "u", None, tmp_path / "kh", vars={"gpuprov_python": sys.executable}
        ),
        hosts.Host(
            "node2", "127.0.0.1", 22, "u", None, tmp_path / "kh", vars={"gpuprov_python": "/nonexistent"}
        ),
    ]
    _, ahead, start_push = _pushes_ahead(tmp_path, sys.executable)
    with pytest.raises(preflight.PreflightFailed, match="node2: no Python env at /nonexistent"):
        preflight.run(selected, "127.0.0.1", None, Nproc("auto"), connected=start_push)
    for one in ahead.values():
        one.cancel()
        assert one.take(sys.executable) is None  # waits for it: cancelled, it closed its own channel
    for channel in fake.channels:
        channel.close()
        # receive.py saw the end of its input and left: 0 before the job's part, 1 if cancelled while it
        # waited for the files' bytes (nothing written either way)
        assert channel.proc.returncode in (0, 1)
    assert sorted(p.name for p in (home / ".gpuprov").iterdir()) == ["files", "torch-import-ok"]
    assert not [p for p in (home / ".gpuprov" / "files").iterdir() if p.name.endswith(".tmp")]


def test_a_large_push_waits_for_preflight_to_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files over push.AHEAD_BYTES in all do not share the connection with preflight's commands: they go
    once preflight has passed (release, or the push taking them)."""
    fake = _fake_hosts(tmp_path, monkeypatch)
    monkeypatch.setattr(push, "AHEAD_BYTES", 4)
    env_python = {"gpuprov_python": sys.executable}
    selected = [hosts.Host("node1", "127.0.0.1", 22, "u", None, tmp_path / "kh", vars=env_python)]
    payload, ahead, start_push = _pushes_ahead(tmp_path, sys.executable)
    checks = preflight.run(selected, "127.0.0.1", None, Nproc("auto"), connected=start_push)
    store = tmp_path / "home" / ".gpuprov" / "files"
    time.sleep(0.5)  # time enough for a push that did not wait
    assert not store.exists() or list(store.iterdir()) == []
    check = checks.checks[0]
    job_dir = ".gpuprov/jobs/20250101-000000-abcd"
    push.push("node1", check.client, check.python, job_dir, payload, {}, ahead=ahead["node1"]).cancel()
    assert fake.round_trips == {"node1": 2}  # the same channel, its bytes sent once released
    assert (tmp_path / "home" / job_dir / "work" / "train.py").read_text() == "print('hi')\n"
    for channel in fake.channels:
        channel.close()
