"""SSH connections opened ahead (launch/connect_ahead.py), driven through gpuprov.cli.main in this process
with ssh.connect replaced: each host is connected once, in the background, and the inventory read once;
input found wrong after the connects began ends with exit 2, every connection closed, nothing run on a
host; input the connects rely on (the SSH key) stops them from starting."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuprov import cli, console, hosts, inventory_cache, ssh


class Client:
    """A connection that records its close and refuses any command (none may run in these tests)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def get_transport(self) -> Any:
        raise AssertionError(f"a command was started on {self.name}")


class Connects:
    def __init__(self) -> None:
        self.clients: list[Client] = []
        self.threads: list[str] = []
        self.lock = threading.Lock()

    def connect(self, host: hosts.Host, timeout: float = 0) -> Any:
        with self.lock:
            self.threads.append(threading.current_thread().name)
            self.clients.append(Client(host.name))
            return self.clients[-1]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "id").write_text("a key\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("GPUPROV_INVENTORY", raising=False)
    monkeypatch.setattr(sys, "argv", ["pytest"])
    yield tmp_path
    console.set_verbosity(console.Verbosity.NORMAL)


def _inventory(here: Path, extra: str = "", key: str = "id") -> None:
    (here / "inventory.ini").write_text(
        "[gpu_nodes]\n"
        f"node1 ansible_host=10.0.0.1 ansible_ssh_private_key_file={here / key} {extra}\n"
        f"node2 ansible_host=10.0.0.2 ansible_ssh_private_key_file={here / key}\n"
    )


def _main(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    return int(done.value.code or 0)


def test_input_found_wrong_after_the_connects_closes_them_unused(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _inventory(here, extra=f"gpuprov_torchrun_template={here / 'missing.j2'}")
    fake = Connects()
    monkeypatch.setattr(ssh, "connect", fake.connect)
    loads = []
    load = inventory_cache.load

    def counted(*args: Any) -> Any:
        loads.append(args)
        return load(*args)

    monkeypatch.setattr(inventory_cache, "load", counted)

    assert _main("launch", "-i", "inventory.ini", "train.py") == 2
    assert "missing.j2" in capsys.readouterr().err
    assert sorted(c.name for c in fake.clients) == ["node1", "node2"]  # each host once, in the background
    assert all(name.startswith("connect-ahead-") for name in fake.threads)
    assert all(c.closed for c in fake.clients)  # closed with nothing run on them (Client refuses commands)
    assert len(loads) == 1  # plan() took the hosts the connects were started for


def test_a_missing_ssh_key_starts_no_connection(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _inventory(here, key="no-such-key")
    fake = Connects()
    monkeypatch.setattr(ssh, "connect", fake.connect)
    assert _main("launch", "-i", "inventory.ini", "train.py") == 2
    assert "no-such-key" in capsys.readouterr().err
    assert fake.clients == []


def test_a_failed_connect_is_preflights_problem(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _inventory(here)

    def refuse(host: hosts.Host, timeout: float = 0) -> Any:
        raise ssh.Unreachable(f"{host.label}: cannot connect over SSH: Connection refused")

    monkeypatch.setattr(ssh, "connect", refuse)
    assert _main("launch", "-i", "inventory.ini", "train.py") == 6
    err = capsys.readouterr().err
    assert "node1 (10.0.0.1:22): cannot connect over SSH: Connection refused" in err
    assert "node2 (10.0.0.2:22)" in err


def test_a_connect_dropped_while_under_way_is_closed_when_it_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuprov.launch import connect_ahead

    release = threading.Event()
    fake = Connects()

    def slow(host: hosts.Host, timeout: float = 0) -> Any:
        release.wait(10)
        return fake.connect(host)

    monkeypatch.setattr(ssh, "connect", slow)
    host = hosts.Host("node1", "10.0.0.1", 22, "u", None, Path("/nonexistent/known_hosts"))
    pending = connect_ahead._Pending(host, threading.BoundedSemaphore(1))
    pending.drop()  # the launch ended (Ctrl-C) before the connect finished: it does not wait for it
    assert not pending.done.is_set()
    release.set()
    assert pending.done.wait(10)
    assert [c.closed for c in fake.clients] == [True]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's procfs (takes no new files)")
def test_a_state_dir_without_room_for_the_record_starts_no_connection(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _inventory(here)
    fake = Connects()
    monkeypatch.setattr(ssh, "connect", fake.connect)
    monkeypatch.setenv("GPUPROV_STATE_DIR", "/proc/gpuprov-test-state")
    assert _main("launch", "-i", "inventory.ini", "train.py") == 3
    assert fake.clients == []
