"""`--push-image`: stream an image from the controller to the hosts that lack it (clusters with no registry).

    push_image(targets, image, engine_for=...) -> PushReport     (launch calls it after preflight)

One SSH channel per host carries everything (onhost/image_load.py, run with the host's system Python):

1. Every host at once: the helper asks its engine for the image ID (`ENGINE image inspect`) and answers
   `have` or `need`: one round trip. A host that has it is done (its channel closed).
2. Only if some host needs it, the archive is made ONCE on the controller (image_archive: the engine's
   `save`, or the archive file given), however many hosts need it.
3. It is streamed to the hosts that need it, at most max_parallel at a time, each on its own channel
   into the host's `ENGINE load`; the host checks size and sha256 before the load may see the end of its
   input, then checks the engine has the image ID and tags it. Uncompressed: on a LAN the load, not the
   wire, is the cost (docs/containers-push.md has the figures).

What is compared is the image ID (the config digest), not the registry's manifest digest, which `docker
save` does not keep (image_archive's docstring). Nothing half-loaded is left: a short stream, a failed load
(a full disk) or Ctrl-C stops the host's load before its input ends, and the helper removes its temporary
folder; the next run asks again and redoes the hosts that lack the image. Ctrl-C (or SIGTERM): every
host's input is closed, each helper stops its load and says so (up to STOP_WAIT_S), then PushInterrupted
(exit 130) with one line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gpuprov import console, hosts, interrupts, onhost, ssh
from gpuprov.errors import ExitCode, GpuprovError
from gpuprov.launch import image_archive

HAD, LOADED, FAILED = "had", "loaded", "failed"  # a host's outcome in the report
_NEED = "need"  # asked, lacks the image, waiting for the archive
ANSWER_TIMEOUT_S = 120.0  # the helper's first answer: one `ENGINE image inspect`
STOP_WAIT_S = 30.0  # after Ctrl-C, how long a host's helper may take to stop its load and clean up
MAX_PARALLEL = 8  # streams at once: the controller's uplink is shared, more add threads, not bandwidth
BLOCK = 1 << 20

# The host's engine command: ("docker",), ("sudo", "-n", "podman"), ("podman", "--root", DIR).
EngineFor = Callable[[hosts.Host], Sequence[str]]


class Target(Protocol):
    """A host to push to, with the SSH session already open to it (launch's preflight HostCheck) or None."""

    @property
    def host(self) -> hosts.Host: ...

    @property
    def client(self) -> ssh.Client | None: ...


@dataclass(frozen=True)
class HostTarget:
    """A Target for a caller that holds no session: push_image opens one and closes it again."""

    host: hosts.Host
    client: ssh.Client | None = None


@dataclass(frozen=True)
class HostPush:
    host: str
    state: str  # HAD, LOADED or FAILED
    reason: str = ""  # FAILED: why, one line
    unreachable: bool = False  # FAILED because SSH failed


@dataclass(frozen=True)
class PushReport:
    image: str
    image_id: str  # sha256:<hex>: what the hosts' engines now have; run the image by it
    tag: str  # the name the loaded image got on the hosts that loaded it
    hosts: list[HostPush]
    archive_bytes: int = 0  # what each loading host received (0: none needed it, nothing was saved)

    def names(self, state: str) -> list[str]:
        return [h.host for h in self.hosts if h.state == state]

    def error(self) -> GpuprovError | None:
        """One line for the hosts that do not have the image now (exit 6 if SSH failed on one, else 7)."""
        failed = [h for h in self.hosts if h.state == FAILED]
        if not failed:
            return None
        code = ExitCode.HOSTS_UNREACHABLE if any(h.unreachable for h in failed) else ExitCode.PREFLIGHT_FAILED
        reasons = "; ".join(f"{h.host}: {h.reason}" for h in failed)
        return GpuprovError(
            f"image push: {self.image} is not on {len(failed)} host(s) ({reasons}); nothing half-loaded "
            "was left there; fix that and rerun (hosts that have the image are skipped)",
            code,
        )


class PushInterrupted(GpuprovError):
    exit_code = ExitCode.INTERRUPTED


@dataclass
class _Push:
    """One host's push in flight."""

    target: Target
    client: ssh.Client | None = None
    owned: bool = False  # push_image opened the session, and closes it
    channel: ssh.Channel | None = None
    state: str = ""
    reason: str = ""
    unreachable: bool = False
    seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        return self.target.host.name

    def fail(self, reason: str, unreachable: bool = False) -> None:
        self.state, self.reason, self.unreachable = FAILED, reason, unreachable

    def report(self) -> HostPush:
        return HostPush(self.name, self.state, self.reason, self.unreachable)


def tag_for(reference: str, image_id: str) -> str:
    """The name a loaded image gets: the reference's repository, tagged gpuprov-<12 hex of its ID>."""
    repository = reference.split("@", 1)[0]
    slash = repository.rfind("/")
    if repository.rfind(":") > slash:  # a tag (a ':' before the last '/' is a registry's port)
        repository = repository[: repository.rfind(":")]
    return f"{repository}:gpuprov-{image_id.removeprefix('sha256:')[:12]}"


def helper_command(host: hosts.Host, image_id: str, tag: str, engine: Sequence[str]) -> str:
    python = str(host.vars.get("ansible_python_interpreter") or "python3")
    return onhost.python_command(python, onhost.text("image_load.py"), image_id, tag, *engine)


def push_image(
    targets: Sequence[Target],
    image: str,
    *,
    engine_for: EngineFor,
    archive: Path | None = None,
    max_parallel: int = MAX_PARALLEL,
) -> PushReport:
    """Put image on every target that lacks it; the report says per host: had it, loaded, failed (why).

    image: the reference (pinned by digest where the lock asks for that); it must resolve in the
    controller's engine, unless archive (a `docker save` file) is given. BadInput / EnvironmentProblem
    before any host is asked; PushInterrupted on Ctrl-C; host failures are in the report (error()).
    """
    src = image_archive.source(image, archive)
    tag = tag_for(image, src.image_id)
    pushes = [_Push(t) for t in targets]
    sent = 0
    with interrupts.deferred():  # Ctrl-C sets a flag the senders look at between blocks
        try:
            ssh.fan_out(pushes, lambda p: _ask(p, src.image_id, tag, engine_for))
            interrupts.check()
            needing = [p for p in pushes if p.state == _NEED]
            if needing:
                sent = _stream(needing, src, max_parallel)
            interrupts.check()
        except KeyboardInterrupt:
            with interrupts.shielded():
                raise PushInterrupted(_stop_all(pushes)) from None
        finally:
            _close(pushes)
    return PushReport(image, src.image_id, tag, [p.report() for p in pushes], sent)


def _stream(needing: list[_Push], src: image_archive.Source, max_parallel: int) -> int:
    with src.archive() as arc:
        console.step(
            f"Pushing {src.reference} ({arc.size / 1e6:.0f} MB, image ID {src.image_id[7:19]}) to "
            f"{len(needing)} host(s) that lack it: {', '.join(p.name for p in needing)}"
        )
        ssh.fan_out(needing, lambda p: _send(p, arc), max_parallel=max_parallel)
        return arc.size


def _ask(push: _Push, image_id: str, tag: str, engine_for: EngineFor) -> None:
    """Open the host's helper; it answers whether its engine has the image (state HAD or _NEED)."""
    host = push.target.host
    try:
        push.client = push.target.client
        if push.client is None:
            push.client = ssh.connect(host)
            push.owned = True
        command = helper_command(host, image_id, tag, engine_for(host))
        push.channel = ssh.open_channel(push.client, command, read_timeout=ANSWER_TIMEOUT_S)
        answer = push.channel.readline().decode(errors="replace").strip()
    except ssh.SessionLost as exc:
        push.fail(f"SSH failed ({ssh.reason(exc.cause)})", unreachable=True)
        return
    except GpuprovError as exc:  # Unreachable, HostKeyProblem, BadInput (a key file)
        push.fail(ssh.without_label(exc, host), unreachable=isinstance(exc, ssh.Unreachable))
        return
    if answer == "have":
        push.state = HAD
        push.channel.close()
    elif answer == _NEED:
        push.state = _NEED
    else:
        push.fail(_helper_error(push.channel))


def _send(push: _Push, arc: image_archive.Archive) -> None:
    """Stream the archive into the host's load and read its verdict (LOADED or FAILED)."""
    channel = push.channel
    assert channel is not None
    push.started = time.monotonic()
    channel.settimeout(None)  # a slow disk may hold the stream for long; keepalives notice a lost host
    try:
        channel.send(json.dumps({"size": arc.size, "sha256": arc.sha256}).encode() + b"\n")
        with arc.path.open("rb") as f:
            for block in iter(lambda: f.read(BLOCK), b""):
                if interrupts.requested():
                    return  # _stop_all stops the host's load
                channel.send(block)
        rc = _exit_status(channel)
    except ssh.SessionLost:
        rc = -1  # the helper may have ended first (its load failed): its stderr says why
    if rc is None:
        return
    try:
        answer = channel.read().decode(errors="replace").split()
    except ssh.SessionLost:
        answer = []
    push.seconds = time.monotonic() - push.started
    if rc == 0 and answer[-1:] == [LOADED]:
        push.state = LOADED
        console.detail(f"{push.name}: loaded in {push.seconds:.1f} s")
    else:
        push.fail(_helper_error(channel))
        push.unreachable = push.reason.startswith("SSH failed")


def _exit_status(channel: ssh.Channel) -> int | None:
    """The helper's exit status once it ends; None when Ctrl-C came first."""
    while not interrupts.requested():
        try:
            return channel.exit_status(timeout=0.5)
        except ssh.SessionLost as exc:
            if not isinstance(exc.cause, TimeoutError):
                raise
    return None


def _helper_error(channel: ssh.Channel) -> str:
    """The helper's one line on stderr (it exits after a problem), or what broke the session."""
    try:
        text = channel.read_stderr().decode(errors="replace").strip()
    except ssh.SessionLost as exc:
        return f"SSH failed ({ssh.reason(exc.cause)})"
    lines = text.splitlines()
    if lines:
        return lines[-1].strip()
    return "SSH failed (the connection closed before the host answered)"


def _stop_all(pushes: list[_Push]) -> str:
    """Close every unfinished host's input (its helper then stops the load, removes its temporary folder
    and exits); wait for each to say so. The one line for PushInterrupted."""
    busy = [p for p in pushes if p.state == _NEED and p.channel is not None]
    for push in busy:
        try:
            assert push.channel is not None
            push.channel.shutdown_write()
        except ssh.SessionLost:
            pass
    deadline = time.monotonic() + STOP_WAIT_S
    late = []
    for push in busy:
        assert push.channel is not None
        try:
            push.channel.exit_status(timeout=max(0.1, deadline - time.monotonic()))
        except ssh.SessionLost:
            late.append(push.name)
    done = [p.name for p in pushes if p.state == LOADED]
    words = f"interrupted during the image push: stopped the push to {len(busy) - len(late)} host(s)"
    words += "; nothing half-loaded is left"
    if late:
        words += f" except perhaps on {', '.join(late)} (no answer within {STOP_WAIT_S:g} s)"
    if done:
        words += f"; {', '.join(done)} had finished and keep the whole image"
    return words


def _close(pushes: list[_Push]) -> None:
    for push in pushes:
        if push.channel is not None:
            push.channel.close()
        if push.owned and push.client is not None:
            push.client.close()
