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
import socket
from collections.abc import Callable, Iterator

import pytest

from gpuprov.onhost.sockets import bind_first


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
