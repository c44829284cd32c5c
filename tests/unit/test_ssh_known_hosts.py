"""gpuprov.ssh's known_hosts: one parse per file shared by every host of a run, and host key checking
unchanged (a known key is accepted, a changed one refused, an unknown one refused), against an in-process
SSH server (paramiko's server side) on a local port."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from gpuprov import hosts, ssh


@pytest.fixture
def server() -> Iterator[tuple[int, paramiko.PKey]]:
    """A local SSH server (any number of connections) whose host key is returned; it accepts no user."""
    key = paramiko.Ed25519Key.from_private_key_file(str(_ed25519_file()))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            transport = paramiko.Transport(conn)
            transport.add_server_key(key)
            transports.append(transport)
            with contextlib.suppress(paramiko.SSHException, EOFError, OSError):  # the client gave up
                transport.start_server(server=paramiko.ServerInterface())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], key
    listener.close()
    for transport in transports:
        transport.close()


_KEYS: dict[str, Path] = {}


def _ed25519_file(name: str = "host") -> Path:
    """An Ed25519 private key in OpenSSH format (paramiko cannot generate one), made once per test run."""
    if name not in _KEYS:
        path = Path(tempfile.mkdtemp()) / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
        _KEYS[name] = path
    return _KEYS[name]


def _host(port: int, tmp_path: Path, name: str = "node1") -> hosts.Host:
    key = tmp_path / "id"
    key.write_text(_ed25519_file("client").read_text())
    key.chmod(0o600)
    return hosts.Host(name, "127.0.0.1", port, "nobody", key, tmp_path / "known_hosts")


def _line(name: str, key: paramiko.PKey) -> str:
    return f"{name} {key.get_name()} {key.get_base64()}\n"


def _other_key() -> paramiko.PKey:
    return paramiko.Ed25519Key.from_private_key_file(str(_ed25519_file("other")))


@pytest.fixture(autouse=True)
def _need_ssh_keygen() -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("needs ssh-keygen (openssh-client) to make Ed25519 keys")


def test_a_known_key_is_accepted_among_many_lines(server: tuple[int, paramiko.PKey], tmp_path: Path) -> None:
    port, key = server
    other = _other_key()
    lines = [_line(f"host{i}.example.org", other) for i in range(200)]
    hashed = paramiko.HostKeys.hash_host(f"[127.0.0.1]:{port}")
    (tmp_path / "known_hosts").write_text("".join(lines) + _line(hashed, key))
    with pytest.raises(ssh.Unreachable, match="the server refused"):  # past the host key: auth is refused
        ssh.connect(_host(port, tmp_path), timeout=5)


def test_a_changed_key_is_refused(server: tuple[int, paramiko.PKey], tmp_path: Path) -> None:
    port, _ = server
    (tmp_path / "known_hosts").write_text(_line(f"[127.0.0.1]:{port}", _other_key()))
    with pytest.raises(ssh.HostKeyProblem, match="host key CHANGED"):
        ssh.connect(_host(port, tmp_path), timeout=5)


def test_an_unknown_host_is_refused(server: tuple[int, paramiko.PKey], tmp_path: Path) -> None:
    port, key = server
    (tmp_path / "known_hosts").write_text(_line("127.0.0.1", key))  # port 22's entry, not this port's
    with pytest.raises(ssh.HostKeyProblem):
        ssh.connect(_host(port, tmp_path), timeout=5)


def test_the_file_is_parsed_once_for_all_hosts_and_again_after_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parses: list[str] = []
    real = paramiko.HostKeys

    def counting(filename: str) -> paramiko.HostKeys:
        parses.append(filename)
        return real(filename)

    monkeypatch.setattr(paramiko, "HostKeys", counting)
    known = tmp_path / "known_hosts"
    first, second = _other_key(), paramiko.Ed25519Key.from_private_key_file(str(_ed25519_file()))
    known.write_text(_line("10.0.0.1", first) + _line("[10.0.0.2]:2222", second))
    node1 = hosts.Host("node1", "10.0.0.1", 22, "u", None, known)
    node2 = hosts.Host("node2", "10.0.0.2", 2222, "u", None, known)
    one, two = ssh._new_client(node1), ssh._new_client(node2)
    assert len(parses) == 1
    # Each client knows its own host's keys only, in the file's order.
    assert list(one.get_host_keys()["10.0.0.1"].values()) == [first]
    assert list(two.get_host_keys()["[10.0.0.2]:2222"].values()) == [second]
    assert "10.0.0.1" not in two.get_host_keys()
    known.write_text(_line("10.0.0.1", second))  # ssh-keygen -R and a new key: another version of the file
    assert list(ssh._new_client(node1).get_host_keys()["10.0.0.1"].values()) == [second]
    assert len(parses) == 2
