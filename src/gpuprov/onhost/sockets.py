"""The TCP port test both host programs run: a listener on one host, a token sent from another.

launch's probe.py (preflight: can the workers reach the master's rendezvous port) and check's hostprobe.py
(every host reaches every other's rendezvous and NCCL/gloo ports) use these. Standard library only
(Python 3.6 parses it: see gpuprov.onhost): the programs are sent as `python -c` text, so
gpuprov.onhost.program() puts this module's code where the program imports it; nothing is installed on the
host.
"""

import fcntl
import os
import socket
import time
from typing import Callable, Iterable, Optional

# A launch's hold on its master port, from its push to its end (gpuprov.onhost.receive.CLAIM_PATH).
CLAIM_PATH = "/tmp/gpuprov-master-port-{}.lock"


def held_by_a_launch(port: int) -> bool:
    """Whether a gpuprov launch holds the port (its torchrun may not listen yet): busy, as if it did."""
    try:
        fd = os.open(CLAIM_PATH.format(port), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # a link or unreadable: no launch could take it either
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a moment only: receive.py retries meanwhile
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def bind_first(ports: Iterable[int]) -> Optional[socket.socket]:
    """A listening TCP socket on the first free port of `ports` (0: one the kernel picks from
    ip_local_port_range), or None when none is free.

    Free as torch's TCPStore server will find it: it sets SO_REUSEADDR before bind
    (torch/csrc/distributed/c10d/socket.cpp, SocketListenOp::tryListen), so a port left in TIME_WAIT by a
    job that just ended is free, and one something listens on is not (Linux refuses that bind anyway).
    A port a gpuprov launch holds (held_by_a_launch) is busy too."""
    for port in ports:
        if port and held_by_a_launch(port):
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            # With SO_REUSEADDR two sockets may both bind a port nobody listens on yet; listen() decides.
            s.listen(64)
        except OSError:
            s.close()
            continue
        return s
    return None


def accept_tokens(sock: socket.socket, expected: int, deadline: float, say: Callable[[str], None]) -> None:
    """Accept up to `expected` connections until `deadline` (time.monotonic()), `got TOKEN` for each;
    closes the socket."""
    got = 0
    while got < expected and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            conn, _ = sock.accept()
        except OSError:
            break
        conn.settimeout(2)
        data = b""
        try:
            # Read to EOF: the sender closes first, so no TIME_WAIT is left on this port for torchrun.
            while True:
                chunk = conn.recv(256)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        conn.close()
        say("got " + data.decode(errors="replace").strip())
        got += 1
    sock.close()


def send_token(address: str, port: int, token: str, timeout: float) -> str:
    """Connect to address:port and send the token: `ok`, or why it could not."""
    try:
        conn = socket.create_connection((address, port), timeout=timeout)
        conn.sendall(token.encode() + b"\n")
        conn.close()
    # socket.timeout, not TimeoutError: the hosts' Python may be 3.6-3.9, where it is not a TimeoutError.
    except socket.timeout:
        return f"timed out after {timeout:g}s"
    except OSError as exc:
        return exc.strerror or str(exc)
    return "ok"
