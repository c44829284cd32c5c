"""SSH to the hosts of an inventory: connect, run a command, copy files, and do one thing on every host.

`connect()` opens a paramiko session with strict host key checking, always: a host whose key is not in
its known_hosts file, or whose key changed, is refused with one line that shows the fingerprint and says
how to accept it. `run()` runs a command and waits for it, with a timeout. `put()`, `put_bytes()` and
`get()` copy files over SFTP. `fan_out()` calls a function for every host (or any item) in parallel, at
most max_parallel at a time, each within its own timeout, and returns each one's result or error in
input order. Everything gpuprov does over SSH (bootstrap preflight, launch, the sandbox) goes through here.
"""

from __future__ import annotations

import logging
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, NoReturn, TypeVar

import paramiko

from gpuprov.errors import BadInput, GpuprovError
from gpuprov.hosts import Host

CONNECT_TIMEOUT_S = 10.0
KEEPALIVE_S = 5  # notice a lost host within seconds, not at the TCP timeout
MAX_PARALLEL = 32
ItemT = TypeVar("ItemT")
ValueT = TypeVar("ValueT")

# paramiko logs every failed handshake with its traceback (20 lines per host) before raising; the exception
# is what gpuprov reports, as one line.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


class HostKeyProblem(GpuprovError):
    """The host's SSH key is unknown or changed; the message says how to check and accept it."""


class Unreachable(GpuprovError):
    """No SSH session: the host did not answer, or refused our key."""


class SessionLost(GpuprovError):
    """A command or a file copy on an open session failed: the connection broke or timed out."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class TimedOut(GpuprovError):
    """fan_out: the call for one item did not finish within its timeout."""


# ----- connecting ---------------------------------------------------------------------------------------


class _RecordingReject(paramiko.RejectPolicy):
    """Strict host key checking that keeps the key it refused, so the error can show its fingerprint."""

    def __init__(self) -> None:
        self.refused: paramiko.PKey | None = None

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        self.refused = key
        super().missing_host_key(client, hostname, key)


def known_hosts_name(host: Host) -> str:
    """The name known_hosts uses for the host: 'addr', or '[addr]:port' off port 22."""
    return host.address if host.port == 22 else f"[{host.address}]:{host.port}"


def connect(host: Host, timeout: float = CONNECT_TIMEOUT_S) -> paramiko.SSHClient:
    """An SSH session to host, as host.user with host.key_file only, host key checked against known_hosts.

    Raises HostKeyProblem, Unreachable, or BadInput (a key file or known_hosts file that cannot be used).
    """
    client = paramiko.SSHClient()
    if host.known_hosts.is_file():
        try:
            client.load_host_keys(str(host.known_hosts))
        except (OSError, paramiko.SSHException) as exc:
            raise BadInput(
                f"{host.name}: known_hosts file {host.known_hosts} cannot be read: {exc}"
            ) from None
    policy = _RecordingReject()
    client.set_missing_host_key_policy(policy)
    if host.key_file is not None and not host.key_file.is_file():
        raise BadInput(
            f"{host.name}: SSH key {host.key_file} (ansible_ssh_private_key_file) does not exist; "
            "fix the path"
        )
    try:
        client.connect(
            host.address,
            port=host.port,
            username=host.user,
            key_filename=str(host.key_file) if host.key_file else None,
            look_for_keys=host.key_file is None,
            allow_agent=host.key_file is None,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
        )
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise HostKeyProblem(
            f"{host.label}: host key CHANGED: {host.known_hosts} has {exc.expected_key.get_name()} "
            f"{exc.expected_key.fingerprint}, the server now offers {exc.key.get_name()} "
            f"{exc.key.fingerprint}; "
            "this may be an attack or a reinstalled host: verify the new key with its administrator, then "
            f"run: ssh-keygen -R '{known_hosts_name(host)}' -f {host.known_hosts} and add the new key"
        ) from None
    except paramiko.AuthenticationException:
        client.close()
        key = str(host.key_file) if host.key_file else "the keys in ~/.ssh and the SSH agent"
        raise Unreachable(
            f"{host.label}: the server refused {key} for user {host.user}; "
            "add the public key to the user's ~/.ssh/authorized_keys or fix ansible_user / the key"
        ) from None
    except paramiko.SSHException as exc:
        client.close()
        if policy.refused is not None:
            offered = policy.refused
            raise HostKeyProblem(
                f"{host.label}: host key unknown: the server offers "
                f"{offered.get_name()} {offered.fingerprint}, "
                f"which is not in {host.known_hosts}; "
                "if that fingerprint is the host's (ask its administrator), run: "
                f"ssh-keyscan -p {host.port} -t {_keyscan_type(offered)} {host.address} >> {host.known_hosts}"
            ) from None
        if "protocol banner" in str(exc):
            raise Unreachable(
                f"{host.label}: something answers on port {host.port} but it is not an SSH server "
                "(no SSH banner); check ansible_host and ansible_port"
            ) from None
        raise Unreachable(f"{host.label}: SSH failed: {exc}") from None
    except (OSError, EOFError) as exc:
        client.close()
        if isinstance(exc, (socket.timeout, TimeoutError)):
            reason = "timed out"
        else:
            reason = (getattr(exc, "strerror", None) or str(exc)) or type(exc).__name__
        raise Unreachable(
            f"{host.label}: cannot connect over SSH: {reason}; is the host up and sshd running?"
        ) from None
    transport = client.get_transport()
    if transport is not None:
        transport.set_keepalive(KEEPALIVE_S)
    return client


def _keyscan_type(key: paramiko.PKey) -> str:
    name = str(key.get_name())
    if name.startswith("ecdsa"):
        return "ecdsa"
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa", "rsa-sha2-256": "rsa", "rsa-sha2-512": "rsa"}.get(
        name, name
    )


def without_label(error: GpuprovError, host: Host) -> str:
    """The error's message without the leading 'name (addr:port): ' (for a table with a host column)."""
    prefix = f"{host.label}: "
    return error.message[len(prefix) :] if error.message.startswith(prefix) else error.message


# ----- commands -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        lines = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return lines[-1].strip() if lines else f"exit status {self.rc}"


def run(client: paramiko.SSHClient, command: str, timeout: float = 60, stdin: bytes | None = None) -> Result:
    """Run a shell command on the host and wait for it (timeout: seconds without output, then SessionLost).

    stdin, when given, is written to the command's standard input, which is then closed.
    """
    try:
        transport = client.get_transport()
        if transport is None or not transport.is_active():  # closed: paramiko would fail on None
            raise EOFError("the connection is closed")
        channel_in, channel_out, channel_err = client.exec_command(command, timeout=timeout)
        if stdin is not None:
            channel_in.write(stdin)
            channel_in.flush()
        channel_in.channel.shutdown_write()
        out = channel_out.read().decode(errors="replace")
        err = channel_err.read().decode(errors="replace")
        rc = channel_out.channel.recv_exit_status()
    except (TimeoutError, paramiko.SSHException, OSError, EOFError) as exc:
        raise SessionLost(
            f"SSH command failed ({type(exc).__name__}: {exc or 'connection lost'})", exc
        ) from None
    return Result(rc, out, err)


def open_channel(
    client: paramiko.SSHClient, command: str, *, read_timeout: float | None = None, open_timeout: float = 10
) -> paramiko.Channel:
    """Start a command on a channel of its own and return at once, for the caller to stream its stdin,
    stdout and stderr (stdout by channel.makefile, stderr by makefile_stderr).

    read_timeout: seconds a read may wait for data (None: as long as the connection lives; keepalives
    notice a lost host). Raises SessionLost when the connection is gone.
    """
    try:
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            raise EOFError("the connection is closed")
        channel = transport.open_session(timeout=open_timeout)
        channel.settimeout(read_timeout)
        channel.exec_command(command)
    except (TimeoutError, paramiko.SSHException, OSError, EOFError) as exc:
        raise SessionLost(
            f"SSH command failed ({type(exc).__name__}: {exc or 'connection lost'})", exc
        ) from None
    return channel


# ----- files --------------------------------------------------------------------------------------------


def put(sftp: paramiko.SFTPClient, local: Path, remote: str, mode: int = 0o600) -> None:
    """Copy a local file to remote (a path on the host); it appears there whole (copied beside, renamed)."""
    folder, name = posixpath.split(remote)
    tmp = posixpath.join(folder, f".{name}.{uuid.uuid4().hex[:8]}")
    try:
        sftp.put(str(local), tmp, confirm=True)
        sftp.chmod(tmp, mode)
        sftp.posix_rename(tmp, remote)
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise SessionLost(f"copying {local} to {remote} failed: {exc}", exc) from None


def put_bytes(sftp: paramiko.SFTPClient, data: bytes, remote: str, mode: int = 0o600) -> None:
    """Write data to remote (a path on the host), its mode set before any byte is written."""
    try:
        with sftp.open(remote, "wb") as f:
            f.chmod(mode)
            f.write(data)
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise SessionLost(f"writing {remote} failed: {exc}", exc) from None


def get(sftp: paramiko.SFTPClient, remote: str, local: Path) -> None:
    """Copy the remote file to local."""
    try:
        sftp.get(remote, str(local))
    except (OSError, paramiko.SSHException, EOFError) as exc:
        raise SessionLost(f"copying {remote} to {local} failed: {exc}", exc) from None


# ----- every host at once -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome(Generic[ItemT, ValueT]):
    """What fn did for one item: its value, or the exception it raised (or TimedOut)."""

    item: ItemT
    value: ValueT | None = None
    error: BaseException | None = None

    def get(self) -> ValueT:
        """The value; the error is raised instead when there was one."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # None only when ValueT admits it (no error)


def fan_out(
    items: Sequence[ItemT],
    fn: Callable[[ItemT], ValueT],
    *,
    max_parallel: int = MAX_PARALLEL,
    timeout: float | None = None,
) -> list[Outcome[ItemT, ValueT]]:
    """fn(item) for every item, at most max_parallel at a time; one Outcome per item, in input order.

    An exception fn raises is that item's error; the others go on. timeout: seconds each call may take,
    counted from its start; after that its Outcome is a TimedOut error and its slot goes to the next item.
    A call cannot be killed: it goes on in the background until fn returns, so fn should bound its own
    waits too (SSH timeouts). On Ctrl-C no further call starts; those running are waited for (each within
    its timeout), then KeyboardInterrupt is raised.
    """
    if max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1, not {max_parallel}")
    results: list[Outcome[ItemT, ValueT] | None] = [None] * len(items)
    changed = threading.Condition()
    deadlines: dict[int, float] = {}  # index -> monotonic deadline, for the calls running now
    running: set[int] = set()

    def call(index: int) -> None:
        try:
            outcome: Outcome[ItemT, ValueT] = Outcome(items[index], value=fn(items[index]))
        except BaseException as exc:  # a KeyboardInterrupt from interrupts.check() too: the caller raises it
            outcome = Outcome(items[index], error=exc)
        with changed:
            if index in running:  # not given up on by a timeout
                running.discard(index)
                results[index] = outcome
                changed.notify_all()

    def give_up_late(now: float) -> None:
        for index in [i for i in running if deadlines.get(i, now + 1) <= now]:
            running.discard(index)
            results[index] = Outcome(items[index], error=TimedOut(f"no result within {timeout:g} s"))

    def wait_for_change() -> None:
        now = time.monotonic()
        give_up_late(now)
        waits = [deadlines[i] - now for i in running if i in deadlines]
        if running:
            changed.wait(timeout=max(0.0, min(waits)) if waits else None)
            give_up_late(time.monotonic())

    next_index = 0
    interrupted: BaseException | None = None
    with changed:
        while next_index < len(items) or running:
            try:
                while interrupted is None and next_index < len(items) and len(running) < max_parallel:
                    index, next_index = next_index, next_index + 1
                    running.add(index)
                    if timeout is not None:
                        deadlines[index] = time.monotonic() + timeout
                    threading.Thread(target=call, args=(index,), daemon=True, name=f"fan-out-{index}").start()
                if interrupted is not None and not running:
                    break
                wait_for_change()
            except KeyboardInterrupt as exc:
                if interrupted is not None:
                    raise  # a second Ctrl-C: stop waiting
                interrupted = exc
    if interrupted is not None:
        raise interrupted
    done = [outcome for outcome in results if outcome is not None]
    assert len(done) == len(items)
    return done


def values(outcomes: Sequence[Outcome[ItemT, ValueT]]) -> list[ValueT]:
    """Every outcome's value, in order; the first error (in input order) is raised instead."""
    return [outcome.get() for outcome in outcomes]
