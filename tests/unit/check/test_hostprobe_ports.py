"""hostprobe.py's port test, run here as `gpuprov check` runs it on the hosts: `python -c <its text>` through
a shell, with gpuprov/onhost/sockets.py's code put in place of its import, by this machine's python3 (stdlib
only: gpuprov is not importable there)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys

import pytest

from gpuprov.check.gather import probe_code
from gpuprov.onhost import python_command

PYTHONS = [sys.executable] + ([p] if (p := shutil.which("python3", path="/usr/bin")) else [])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_sent_text_does_not_import_gpuprov() -> None:
    lines = probe_code().splitlines()
    assert not [line for line in lines if line.startswith(("from gpuprov", "import gpuprov"))]
    assert "def program(" not in probe_code()  # the controller side (gpuprov.onhost.program) is not sent
    assert "def accept_tokens(" in probe_code()


@pytest.mark.parametrize("python", PYTHONS)
def test_listen_on_both_ports_and_connect_to_them(python: str) -> None:
    first = _free_port()
    command = python_command(python, probe_code(), "listen", str(first), str(first), "1", "10")
    with subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE, text=True) as listener:
        assert listener.stdout is not None
        word, rendezvous, ephemeral = listener.stdout.readline().split()
        assert (word, int(rendezvous)) == ("ports", first) and int(ephemeral) not in (0, first)
        closed = _free_port()  # nobody listens there: refused
        targets = [
            ["r", "127.0.0.1", int(rendezvous), "tok node2"],
            ["e", "127.0.0.1", int(ephemeral), "tok node2"],
            ["closed", "127.0.0.1", closed, "tok node2"],
        ]
        sent = subprocess.run(
            ["bash", "-c", python_command(python, probe_code(), "connect", "3", json.dumps(targets))],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert json.loads(sent.stdout) == {"r": "ok", "e": "ok", "closed": "Connection refused"}, sent.stderr
        assert listener.stdout.read().splitlines() == ["got tok node2", "got tok node2"]
        assert listener.wait(timeout=10) == 0


@pytest.mark.parametrize("python", PYTHONS)
def test_listen_says_busy_when_the_range_is_taken(python: str) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        port = str(taken.getsockname()[1])
        command = python_command(python, probe_code(), "listen", port, port, "1", "5")
        answer = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)
    assert answer.stdout.strip() == "busy", answer.stderr
