"""The port test's controller half, for launch's preflight and `gpuprov check` alike.

The hosts' half is gpuprov.onhost.sockets (in probe.py's and hostprobe.py's `listen` and `connect`): a
listener on one host, a token sent from another. Here: which host sends which token to which port, and the
verdict. A probe passes when its sender answers `ok` and, where the listener's `got TOKEN` lines are read
(launch reads them; check does not), its token arrived.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

NOT_RECEIVED = "the master did not receive the test connection"


@dataclass(frozen=True)
class Probe:
    """One connection to make: from the source host to one port of the target host."""

    source: str  # the host that connects
    target: str  # the host that listens
    kind: str  # which of its ports ("rendezvous", "NCCL/gloo")
    address: str  # the target's address, as the source reaches it
    port: int
    token: str  # what the source sends; unique per source


def probes(sources: Iterable[str], listening: Mapping[str, tuple[str, Mapping[str, int]]]) -> list[Probe]:
    """A probe from every source to every port of every other listening host (listening: host -> its
    address and its ports by kind), each source with a token of its own."""
    nonce = secrets.token_hex(4)
    return [
        Probe(source, target, kind, address, port, f"{source}-{nonce}")
        for source in sources
        for target, (address, ports) in listening.items()
        if target != source
        for kind, port in ports.items()
    ]


def failures(
    tried: Iterable[Probe], answers: Mapping[Probe, str], received: set[str] | None = None
) -> dict[Probe, str]:
    """Why each failed probe failed: its sender's error (answers: `ok` or why not; none: `no answer`), or,
    when the listener's received tokens are known, that its token never arrived."""
    failed = {}
    for probe in tried:
        answer = answers.get(probe, "no answer")
        if answer != "ok":
            failed[probe] = answer
        elif received is not None and probe.token not in received:
            failed[probe] = NOT_RECEIVED
    return failed
