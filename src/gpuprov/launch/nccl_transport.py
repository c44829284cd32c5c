"""The transport NCCL chose, read from its NCCL_DEBUG=INFO lines as a job's output streams by.

A host with InfiniBand whose ranks fall back to TCP sockets trains, silently and many times slower
(nccl#451): in a container this is what a missing /dev/infiniband, verbs library or memlock limit does.
NCCL says which network it took: `NCCL INFO Using network Socket` (and channels `via NET/Socket/N`) or
`NCCL INFO Using network IB` (`via NET/IB/N`), and `NCCL INFO NET/IB : No device found.` when it found no
IB device. (`NET/Socket : Using [0]eth0...` alone is no sign: NCCL lists its socket interfaces also when it
then takes IB.) Recorded real lines: tests/unit/launch/test_nccl_transport.py.
"""

from __future__ import annotations

import re

from gpuprov import console

_SOCKETS = re.compile(r"NCCL INFO (?:Using network Socket\b|NET/IB : No device found|.* via NET/Socket/)")


def fell_back_to_sockets(line: str) -> bool:
    """Whether NCCL says in this line that its network is TCP sockets (not IB)."""
    return bool(_SOCKETS.search(line))


class Watch:
    """Warns once per host with IB devices whose NCCL uses sockets."""

    def __init__(self, ib_hosts: dict[str, list[str]]) -> None:
        self.ib_hosts = ib_hosts  # host -> its IB devices
        self.warned: set[str] = set()

    def line(self, host: str, text: str) -> None:
        if host in self.warned or host not in self.ib_hosts or "NCCL INFO" not in text:
            return
        if fell_back_to_sockets(text):
            self.warned.add(host)
            devices = ", ".join(self.ib_hosts[host])
            console.warning(
                f"{host} has InfiniBand ({devices}) but NCCL uses TCP sockets there (nccl#451: far slower); "
                "check that the image has rdma-core (libibverbs) and that NCCL_IB_DISABLE is not set"
            )
