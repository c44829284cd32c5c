"""The transport NCCL chose, read from its NCCL_DEBUG=INFO lines as a job's output streams by.

A host with InfiniBand whose ranks fall back to TCP sockets trains, silently and many times slower
(nccl#451): in a container this is what a missing /dev/infiniband, verbs library or memlock limit does.
NCCL says which network it took: `NCCL INFO Using network Socket` (and channels `via NET/Socket/N`) or
`NCCL INFO Using network IB` (`via NET/IB/N`), and `NCCL INFO NET/IB : No device found.` when it found no
IB device. NGC images load NVIDIA's IB net plugin, whose channels read `via NET/IBext/N` or
`via NET/IBext_v8/N` (and whose missing devices may read `NET/IBext... : No device found`). (`NET/Socket :
Using [0]eth0...` alone is no sign: NCCL lists its socket interfaces also when it then takes IB.)

The second, quieter fallback: IB without GPUDirect RDMA. An IB channel whose line ends `/GDRDMA` moves GPU
memory straight to the NIC; one without stages every transfer through host memory (no nvidia-peermem and
no DMA-BUF), which a maintainer points out in nccl#1412 as the cause of its low bandwidth. Only a channel
line says it, and NCCL prints channel lines only for GPU ranks. Recorded real lines:
tests/recorded/nccl-info/ (sources in its README).
"""

from __future__ import annotations

import re

from gpuprov import console

_SOCKETS = re.compile(
    r"NCCL INFO (?:Using network Socket\b|NET/IB(?:ext[^ ]*)? : No device found|.* via NET/Socket/)"
)
_IB_CHANNEL = re.compile(r"NCCL INFO Channel .* via NET/IB(?:ext[^/ ]*)?/\d+(?P<gdr>/GDRDMA)?")


def fell_back_to_sockets(line: str) -> bool:
    """Whether NCCL says in this line that its network is TCP sockets (not IB)."""
    return bool(_SOCKETS.search(line))


def ib_without_gdr(line: str) -> bool:
    """Whether this is an IB channel line without GPUDirect RDMA (host-staged transfers)."""
    found = _IB_CHANNEL.search(line)
    return bool(found and not found.group("gdr"))


class Watch:
    """Warns once per host with IB devices whose NCCL uses sockets, and once per such host whose IB
    channels run without GPUDirect RDMA."""

    def __init__(self, ib_hosts: dict[str, list[str]]) -> None:
        self.ib_hosts = ib_hosts  # host -> its IB devices
        self.warned: set[str] = set()
        self.warned_gdr: set[str] = set()

    def line(self, host: str, text: str) -> None:
        if host in self.warned or host not in self.ib_hosts or "NCCL INFO" not in text:
            return
        devices = ", ".join(self.ib_hosts[host])
        if fell_back_to_sockets(text):
            self.warned.add(host)
            console.warning(
                f"{host} has InfiniBand ({devices}) but NCCL uses TCP sockets there (nccl#451: far slower); "
                "check that the image has rdma-core (libibverbs) and that NCCL_IB_DISABLE is not set"
            )
        elif host not in self.warned_gdr and ib_without_gdr(text):
            self.warned_gdr.add(host)
            console.warning(
                f"{host}: NCCL's InfiniBand channels there run without GPUDirect RDMA (no /GDRDMA in "
                "NCCL's channel lines: transfers are staged through host memory, nccl#1412); load "
                "nvidia-peermem or use a DMA-BUF capable driver and kernel (`gpuprov check` on the host)"
            )
