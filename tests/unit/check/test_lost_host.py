"""A host that stops answering mid-check: the result says what happened, never an empty reason
("SSH command failed (TimeoutError: )")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paramiko
import pytest

from gpuprov import hosts, ssh
from gpuprov.check import gather

SILENT = [
    TimeoutError(),
    EOFError(),
    ConnectionResetError(),
    BrokenPipeError(),
    OSError(),
    paramiko.SSHException(),
]


class _Stalls:
    """stdout/stderr of a command whose host stops answering: the read raises `exc`."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.channel = self

    def write(self, data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass

    def shutdown_write(self) -> None:
        pass

    def read(self) -> bytes:
        raise self.exc


class _Client:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def get_transport(self) -> Any:
        return self

    def is_active(self) -> bool:
        return True

    def exec_command(self, command: str, timeout: float) -> tuple[_Stalls, _Stalls, _Stalls]:
        return _Stalls(self.exc), _Stalls(self.exc), _Stalls(self.exc)

    def close(self) -> None:
        pass


def _said(message: str) -> None:
    assert message.strip() and not message.rstrip().endswith((":", ": )")) and ": )" not in message, message


@pytest.mark.parametrize("exc", SILENT, ids=lambda e: type(e).__name__)
def test_a_host_that_stops_answering_mid_check_is_named_with_a_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, exc: BaseException
) -> None:
    host = hosts.Host("node1", "127.0.0.1", 22, "u", None, tmp_path / "known_hosts")
    monkeypatch.setattr(ssh, "connect", lambda host: _Client(exc))
    found = gather.gather_one(host, [])
    assert found.error is not None
    _said(found.error)
    if isinstance(exc, TimeoutError):
        assert "stopped answering" in found.error and f"{gather.PROBE_TIMEOUT_S:g} s" in found.error


@pytest.mark.parametrize("exc", [*SILENT, ValueError(), KeyError()], ids=lambda e: type(e).__name__)
def test_every_exception_has_a_reason(exc: BaseException) -> None:
    _said(ssh.reason(exc))
    assert ssh.reason(OSError(111, "Connection refused")) == "[Errno 111] Connection refused"
