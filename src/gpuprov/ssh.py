"""THE one SSH layer: connect, run a command, work a channel, copy files, do one thing on every host.

Everything gpuprov does over SSH (bootstrap preflight, launch, check, the sandbox) goes through here, and
no other module imports paramiko. paramiko is imported lazily, on the first connect: `gpuprov --help`,
input errors and the pure unit tests never load it. It is imported without invoke (see import_paramiko).

`connect()` opens a paramiko session with strict host key checking, always: a host whose key is not in
its known_hosts file, or whose key changed, is refused with one line that shows the fingerprint and says
how to accept it. `run()` runs a command and waits for it, with a timeout. `open_channel()` starts a
command on a `Channel` of its own, for the caller to feed its stdin, stream its stdout and stderr line by
line and read its exit status. `open_sftp()`, `put()`, `put_bytes()` and `get()` copy files over SFTP.
`fan_out()` calls a function for every host (or any item) in parallel, at most max_parallel at a time,
each within its own timeout, and returns each one's result or error in input order.

Failures come back as gpuprov's own exceptions, never paramiko's or socket's: HostKeyProblem and
Unreachable (no session), SessionLost (a command, a channel or a copy broke off or timed out; its
`cause` keeps the original exception, its message that exception's text where callers print it).
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

from gpuprov.errors import BadInput, GpuprovError
from gpuprov.hosts import Host

if TYPE_CHECKING:  # paramiko loads on the first connect, not with this module
    import paramiko

    Client = paramiko.SSHClient
    SFTP = paramiko.SFTPClient

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
    """A command, a channel or a file copy on an open session failed: the connection broke or timed out."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


_IMPORTING = threading.Lock()


def import_paramiko() -> None:
    """paramiko, imported with invoke hidden the first time. paramiko.config imports invoke (and invoke
    unittest.mock) at once, only to run `Match exec` lines of an ssh_config file, which gpuprov never reads
    (it connects from the inventory's settings): a third of paramiko's import time, paid by every launch
    before its first connection (0.12 -> 0.08 CPU seconds here). A None in sys.modules makes that import
    fail as paramiko expects when invoke is not installed; invoke is importable again afterwards. Called
    before the first connection (_new_client), and before the threads that connect ahead
    (launch/connect_ahead.py); an import elsewhere first only costs the time."""
    with _IMPORTING:
        hidden = "paramiko" not in sys.modules and "invoke" not in sys.modules
        if hidden:
            sys.modules["invoke"] = None  # type: ignore[assignment]
        try:
            import paramiko  # noqa: F401
        finally:
            if hidden:
                del sys.modules["invoke"]


class TimedOut(GpuprovError):
    """fan_out: the call for one item did not finish within its timeout."""


def _failures() -> tuple[type[BaseException], ...]:
    """What paramiko and the socket under it raise when a session breaks or a read times out."""
    import paramiko

    # socket.timeout is an OSError (and, from Python 3.10, TimeoutError itself).
    return (OSError, EOFError, paramiko.SSHException)


@contextlib.contextmanager
def _lost(describe: Callable[[BaseException], str]) -> Iterator[None]:
    """Turn a broken session (paramiko's or socket's exceptions) into SessionLost(describe(exc))."""
    try:
        yield
    except _failures() as exc:
        raise SessionLost(describe(exc), exc) from None


def reason(exc: BaseException) -> str:
    """What went wrong, for a message, never empty: the exception's text, else what its kind means (a bare
    TimeoutError from a read that waited too long, an EOFError from a closed connection), else its type."""
    text = str(exc).strip()
    if text:
        return text
    for kind, words in _SILENT:
        if isinstance(exc, kind):
            return words
    return f"{type(exc).__name__}, no message"


_SILENT: tuple[tuple[type[BaseException], str], ...] = (
    (TimeoutError, "the host stopped answering: no data in time"),  # socket.timeout too (Python >= 3.10)
    (EOFError, "the connection was closed"),
    (ConnectionResetError, "the connection was reset"),
    (BrokenPipeError, "the connection broke"),
)


def _command_failed(exc: BaseException, timeout: float | None = None) -> str:
    if timeout is not None and isinstance(exc, TimeoutError) and not str(exc).strip():
        words = f"the host stopped answering: nothing came for {timeout:g} s"
    else:
        words = reason(exc)
    return f"SSH command failed ({type(exc).__name__}: {words})"


def _as_is(exc: BaseException) -> str:
    return reason(exc)


# ----- connecting ---------------------------------------------------------------------------------------


def _recording_reject() -> Any:
    """Strict host key checking that keeps the key it refused, so the error can show its fingerprint."""
    import paramiko

    class RecordingReject(paramiko.RejectPolicy):
        def __init__(self) -> None:
            self.refused: paramiko.PKey | None = None

        def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
            self.refused = key
            super().missing_host_key(client, hostname, key)

    return RecordingReject()


def known_hosts_name(host: Host) -> str:
    """The name known_hosts uses for the host: 'addr', or '[addr]:port' off port 22."""
    return host.address if host.port == 22 else f"[{host.address}]:{host.port}"


# Each known_hosts file parsed once per process and version of the file (path, mtime, size, inode).
_known_hosts: dict[tuple[str, int, int, int], Any] = {}
_known_hosts_lock = threading.Lock()


def _parsed_known_hosts(path: Path) -> Any:
    """path parsed by paramiko (HostKeys), shared by every connection of this process.

    paramiko parses the whole file, every key (0.09 CPU seconds for 1000 lines here), and a launch's
    hosts usually share one file (~/.ssh/known_hosts): parsed once, not once per host, in connect threads
    that would hold the GIL for it one after the other. A file changed since is parsed again."""
    import paramiko

    info = path.stat()
    version = (str(path), info.st_mtime_ns, info.st_size, info.st_ino)
    with _known_hosts_lock:
        parsed = _known_hosts.get(version)
        if parsed is None:
            parsed = paramiko.HostKeys(str(path))
            _known_hosts[version] = parsed
    return parsed


def _new_client(host: Host) -> Client:
    """A client that knows host's keys from its known_hosts file and refuses every other key; BadInput for
    bad files."""
    import_paramiko()
    import paramiko

    client = paramiko.SSHClient()
    if host.known_hosts.is_file():
        try:
            known = _parsed_known_hosts(host.known_hosts).lookup(known_hosts_name(host))
        except (OSError, paramiko.SSHException) as exc:
            raise BadInput(
                f"{host.name}: known_hosts file {host.known_hosts} cannot be read: {reason(exc)}"
            ) from None
        for key_type, key in (known or {}).items():  # in the file's order: paramiko prefers the first type
            client.get_host_keys().add(known_hosts_name(host), key_type, key)
    if host.key_file is not None and not host.key_file.is_file():
        raise BadInput(
            f"{host.name}: SSH key {host.key_file} (ansible_ssh_private_key_file) does not exist; "
            "fix the path"
        )
    return client


def connect(host: Host, timeout: float = CONNECT_TIMEOUT_S) -> Client:
    """An SSH session to host, as host.user with host.key_file only, host key checked against known_hosts.

    Raises HostKeyProblem, Unreachable, or BadInput (a key file or known_hosts file that cannot be used).
    """
    import paramiko

    client = _new_client(host)
    policy = _recording_reject()
    client.set_missing_host_key_policy(policy)
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
    except (paramiko.SSHException, OSError, EOFError) as exc:
        client.close()
        raise _connect_error(exc, host, policy.refused) from None
    transport = client.get_transport()
    if transport is not None:
        transport.set_keepalive(KEEPALIVE_S)
    return client


def _connect_error(exc: BaseException, host: Host, refused: Any) -> GpuprovError:
    """connect's one-line error for what paramiko or the socket raised (refused: the unknown key offered)."""
    import paramiko

    if isinstance(exc, paramiko.BadHostKeyException):
        return HostKeyProblem(
            f"{host.label}: host key CHANGED: {host.known_hosts} has {exc.expected_key.get_name()} "
            f"{exc.expected_key.fingerprint}, the server now offers {exc.key.get_name()} "
            f"{exc.key.fingerprint}; "
            "this may be an attack or a reinstalled host: verify the new key with its administrator, then "
            f"run: ssh-keygen -R '{known_hosts_name(host)}' -f {host.known_hosts} and add the new key"
        )
    if isinstance(exc, paramiko.AuthenticationException):
        key = str(host.key_file) if host.key_file else "the keys in ~/.ssh and the SSH agent"
        return Unreachable(
            f"{host.label}: the server refused {key} for user {host.user}; "
            "add the public key to the user's ~/.ssh/authorized_keys or fix ansible_user / the key"
        )
    if isinstance(exc, paramiko.SSHException):
        if refused is not None:
            return HostKeyProblem(
                f"{host.label}: host key unknown: the server offers "
                f"{refused.get_name()} {refused.fingerprint}, "
                f"which is not in {host.known_hosts}; "
                "if that fingerprint is the host's (ask its administrator), run: "
                f"ssh-keyscan -p {host.port} -t {_keyscan_type(refused)} {host.address} >> {host.known_hosts}"
            )
        if "protocol banner" in str(exc):
            return Unreachable(
                f"{host.label}: something answers on port {host.port} but it is not an SSH server "
                "(no SSH banner); check ansible_host and ansible_port"
            )
        return Unreachable(f"{host.label}: SSH failed: {reason(exc)}")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        why = "timed out"
    else:
        why = getattr(exc, "strerror", None) or reason(exc)
    return Unreachable(f"{host.label}: cannot connect over SSH: {why}; is the host up and sshd running?")


def _keyscan_type(key: Any) -> str:
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


def _transport(client: Client) -> Any:
    transport = client.get_transport()
    if transport is None or not transport.is_active():  # closed: paramiko would fail on None
        raise EOFError("the connection is closed")
    return transport


def run(client: Client, command: str, timeout: float = 60, stdin: bytes | None = None) -> Result:
    """Run a shell command on the host and wait for it (timeout: seconds without output, then SessionLost).

    stdin, when given, is written to the command's standard input, which is then closed.
    """
    with _lost(lambda exc: _command_failed(exc, timeout)):
        _transport(client)
        channel_in, channel_out, channel_err = client.exec_command(command, timeout=timeout)
        if stdin is not None:
            channel_in.write(stdin)
            channel_in.flush()
        channel_in.channel.shutdown_write()
        out = channel_out.read().decode(errors="replace")
        err = channel_err.read().decode(errors="replace")
        rc = channel_out.channel.recv_exit_status()
    return Result(rc, out, err)


class Channel:
    """A command running on an SSH channel of its own: its stdin, its stdout and stderr as lines, its end.

    Every method raises SessionLost (the message: the original exception's text) when the connection
    breaks or a read waits longer than the channel's timeout; nothing else of paramiko's leaks out.
    raw is paramiko's Channel (or, in tests, anything with its surface).
    """

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._out: IO[bytes] | None = None
        self._err: IO[bytes] | None = None

    @property
    def closed(self) -> bool:
        return bool(self.raw.closed)

    def settimeout(self, seconds: float | None) -> None:
        """Seconds a read may wait for data (None: as long as the connection lives)."""
        self.raw.settimeout(seconds)

    def send(self, data: bytes) -> None:
        with _lost(_as_is):
            self.raw.sendall(data)

    def shutdown_write(self) -> None:
        """End of the command's stdin."""
        with _lost(_as_is):
            self.raw.shutdown_write()

    def _stdout(self) -> IO[bytes]:
        if self._out is None:
            self._out = self.raw.makefile("rb")
        return self._out

    def _stderr(self) -> IO[bytes]:
        if self._err is None:
            self._err = self.raw.makefile_stderr("rb")
        return self._err

    def readline(self) -> bytes:
        """stdout's next line (b'' at its end)."""
        with _lost(_as_is):
            return self._stdout().readline()

    def lines(self) -> Iterator[bytes]:
        """stdout's lines as they arrive, to its end."""
        while line := self.readline():
            yield line

    def stderr_lines(self) -> Iterator[bytes]:
        """stderr's lines as they arrive, to its end."""
        while True:
            with _lost(_as_is):
                line = self._stderr().readline()
            if not line:
                return
            yield line

    def read(self) -> bytes:
        """The rest of stdout, to its end."""
        with _lost(_as_is):
            return self._stdout().read()

    def read_stderr(self) -> bytes:
        """The rest of stderr, to its end."""
        with _lost(_as_is):
            return self._stderr().read()

    def exit_status(self, timeout: float | None = None) -> int:
        """The command's exit status once it has ended; SessionLost (its cause a TimeoutError) when it has
        not within timeout seconds (None: wait as long as the connection lives)."""
        with _lost(_as_is):
            if timeout is not None and not self.raw.status_event.wait(timeout):
                raise TimeoutError(f"no exit status within {timeout:g} s")
            return int(self.raw.recv_exit_status())

    def close(self) -> None:
        self.raw.close()


def open_channel(
    client: Client, command: str, *, read_timeout: float | None = None, open_timeout: float = 10
) -> Channel:
    """Start a command on a channel of its own and return at once, for the caller to stream its stdin,
    stdout and stderr.

    read_timeout: seconds a read may wait for data (None: as long as the connection lives; keepalives
    notice a lost host). Raises SessionLost when the connection is gone.
    """
    with _lost(_command_failed):
        raw = _open_session(client, open_timeout)
        raw.settimeout(read_timeout)
        raw.exec_command(command)
    return Channel(raw)


# sshd refuses a session past MaxSessions with "open failed" (SSH_OPEN_CONNECT_FAILED), and frees a closed
# session's slot only once its command has exited (OpenSSH session.c): a session opened right after another
# one closed is asked for again for a moment (1.55 s in all).
SESSION_RETRY_PAUSES_S = (0.05, 0.1, 0.2, 0.4, 0.8)


def _open_session(client: Client, open_timeout: float) -> Any:
    import paramiko

    for pause in SESSION_RETRY_PAUSES_S:
        try:
            return _transport(client).open_session(timeout=open_timeout)
        except paramiko.ChannelException as exc:
            if exc.code != paramiko.common.OPEN_FAILED_CONNECT_FAILED:
                raise
        time.sleep(pause)
    return _transport(client).open_session(timeout=open_timeout)


# ----- files --------------------------------------------------------------------------------------------


def open_sftp(client: Client) -> SFTP:
    """An SFTP session on the connection (SessionLost when it is gone)."""
    with _lost(_command_failed):
        _transport(client)
        return client.open_sftp()


def put(sftp: SFTP, local: Path, remote: str, mode: int = 0o600) -> None:
    """Copy a local file to remote (a path on the host); it appears there whole (copied beside, renamed)."""
    folder, name = posixpath.split(remote)
    tmp = posixpath.join(folder, f".{name}.{uuid.uuid4().hex[:8]}")
    with _lost(lambda exc: f"copying {local} to {remote} failed: {reason(exc)}"):
        sftp.put(str(local), tmp, confirm=True)
        sftp.chmod(tmp, mode)
        sftp.posix_rename(tmp, remote)


def put_bytes(sftp: SFTP, data: bytes, remote: str, mode: int = 0o600) -> None:
    """Write data to remote (a path on the host), its mode set before any byte is written."""
    with _lost(lambda exc: f"writing {remote} failed: {reason(exc)}"), sftp.open(remote, "wb") as f:
        f.chmod(mode)
        f.write(data)


def get(sftp: SFTP, remote: str, local: Path) -> None:
    """Copy the remote file to local."""
    with _lost(lambda exc: f"copying {remote} to {local} failed: {reason(exc)}"):
        sftp.get(remote, str(local))


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


class _Calls(Generic[ItemT, ValueT]):
    """fan_out's bookkeeping: which calls run, their deadlines, and the outcomes so far."""

    def __init__(self, items: Sequence[ItemT], fn: Callable[[ItemT], ValueT], timeout: float | None) -> None:
        self.items, self.fn, self.timeout = items, fn, timeout
        self.results: list[Outcome[ItemT, ValueT] | None] = [None] * len(items)
        self.changed = threading.Condition()
        self.deadlines: dict[int, float] = {}  # index -> monotonic deadline, for the calls running now
        self.running: set[int] = set()

    def start(self, index: int) -> None:
        self.running.add(index)
        if self.timeout is not None:
            self.deadlines[index] = time.monotonic() + self.timeout
        threading.Thread(target=self._call, args=(index,), daemon=True, name=f"fan-out-{index}").start()

    def _call(self, index: int) -> None:
        item = self.items[index]
        try:
            outcome: Outcome[ItemT, ValueT] = Outcome(item, value=self.fn(item))
        except BaseException as exc:  # a KeyboardInterrupt from interrupts.check() too: the caller raises it
            outcome = Outcome(item, error=exc)
        with self.changed:
            if index in self.running:  # not given up on by a timeout
                self.running.discard(index)
                self.results[index] = outcome
                self.changed.notify_all()

    def _give_up_late(self, now: float) -> None:
        for index in [i for i in self.running if self.deadlines.get(i, now + 1) <= now]:
            self.running.discard(index)
            self.results[index] = Outcome(
                self.items[index], error=TimedOut(f"no result within {self.timeout:g} s")
            )

    def wait_for_change(self) -> None:
        now = time.monotonic()
        self._give_up_late(now)
        waits = [self.deadlines[i] - now for i in self.running if i in self.deadlines]
        if self.running:
            self.changed.wait(timeout=max(0.0, min(waits)) if waits else None)
            self._give_up_late(time.monotonic())


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
    calls = _Calls(items, fn, timeout)
    next_index = 0
    interrupted: BaseException | None = None
    with calls.changed:
        while next_index < len(items) or calls.running:
            try:
                while interrupted is None and next_index < len(items) and len(calls.running) < max_parallel:
                    calls.start(next_index)
                    next_index += 1
                if interrupted is not None and not calls.running:
                    break
                calls.wait_for_change()
            except KeyboardInterrupt as exc:
                if interrupted is not None:
                    raise  # a second Ctrl-C: stop waiting
                interrupted = exc
    if interrupted is not None:
        raise interrupted
    done = [outcome for outcome in calls.results if outcome is not None]
    assert len(done) == len(items)
    return done


def values(outcomes: Sequence[Outcome[ItemT, ValueT]]) -> list[ValueT]:
    """Every outcome's value, in order; the first error (in input order) is raised instead."""
    return [outcome.get() for outcome in outcomes]
