"""NCCL's transport read from real NCCL_DEBUG=INFO lines (tests/recorded/nccl-info/, sources in its README):
a host with InfiniBand whose NCCL uses sockets is warned about once (nccl#451), a host using IB never."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov import console
from gpuprov.launch import nccl_transport

RECORDED = Path(__file__).parents[2] / "recorded" / "nccl-info"


def lines(name: str) -> list[str]:
    return (RECORDED / name).read_text().splitlines()


@pytest.mark.parametrize(
    "name",
    [
        "socket-fallback-on-ib-host.log",
        "ib-no-device.log",
        "socket-channels.log",
        "ibext-plugin-no-device.log",
    ],
)
def test_sockets_are_recognised(name: str) -> None:
    assert any(nccl_transport.fell_back_to_sockets(line) for line in lines(name))


def test_ib_in_use_is_not_a_fallback_even_with_its_socket_interface_listed() -> None:
    assert not [line for line in lines("ib-in-use.log") if nccl_transport.fell_back_to_sockets(line)]


def test_a_recent_nccl_on_a_host_without_ib_says_sockets() -> None:
    # NCCL 2.28.9 on an H100 host without IB (tests/recorded/gpu-host-h100/): its "No device found" line.
    log = RECORDED.parent / "gpu-host-h100" / "allreduce-1xH100-NCCL_DEBUG-INFO.log"
    assert [
        n
        for n, line in enumerate(log.read_text().splitlines(), 1)
        if nccl_transport.fell_back_to_sockets(line)
    ] == [7, 13]


def test_the_ib_plugins_no_device_line_as_the_review_expects_it_is_a_fallback() -> None:
    # No recorded line has it (the IBext plugin printed "NET/IB : No device found.": #941); the pattern
    # takes both, so a plugin that names itself there is not missed.
    assert nccl_transport.fell_back_to_sockets("h:1:2 [0] NCCL INFO NET/IBext_v8 : No device found.")
    assert not nccl_transport.fell_back_to_sockets("h:1:2 [0] NCCL INFO NET/IBext_v8 : Using [0]mlx5_0:1/IB")


def test_gpudirect_rdma_is_read_from_the_channel_lines() -> None:
    assert [nccl_transport.ib_without_gdr(line) for line in lines("ib-gdrdma.log")] == [False] * 4
    assert all(nccl_transport.ib_without_gdr(line) for line in lines("ib-without-gdrdma.log"))
    assert [nccl_transport.ib_without_gdr(line) for line in lines("ibext-v6-channels.log")] == [
        False,
        True,
        True,
    ]
    assert not [line for line in lines("socket-channels.log") if nccl_transport.ib_without_gdr(line)]


def test_ib_without_gdrdma_warned_once_per_ib_host(monkeypatch: pytest.MonkeyPatch) -> None:
    warned: list[str] = []
    monkeypatch.setattr(console, "warning", warned.append)
    watch = nccl_transport.Watch({"node1": ["mlx5_0"], "node2": ["mlx5_0"]})
    for line in lines("ib-without-gdrdma.log"):
        watch.line("node1", "[rank0]:" + line)
        watch.line("node3", "[rank1]:" + line)  # not an IB host as preflight saw it
    for line in lines("ib-gdrdma.log"):
        watch.line("node2", "[rank2]:" + line)
    assert warned == [
        "node1: NCCL's InfiniBand channels there run without GPUDirect RDMA (no /GDRDMA in NCCL's channel "
        "lines: transfers are staged through host memory, nccl#1412); load nvidia-peermem or use a DMA-BUF "
        "capable driver and kernel (`gpuprov check` on the host)"
    ]


def test_one_warning_per_ib_host_and_none_for_hosts_without_ib(monkeypatch: pytest.MonkeyPatch) -> None:
    warned: list[str] = []
    monkeypatch.setattr(console, "warning", warned.append)
    watch = nccl_transport.Watch({"node1": ["mlx5_0", "mlx5_1"]})
    for line in lines("socket-fallback-on-ib-host.log") + lines("socket-channels.log"):
        watch.line("node1", "[rank0]:" + line)
        watch.line("node2", "[rank1]:" + line)  # no IB there: sockets are what it has
    assert warned == [
        "node1 has InfiniBand (mlx5_0, mlx5_1) but NCCL uses TCP sockets there (nccl#451: far slower); check "
        "that the image has rdma-core (libibverbs) and that NCCL_IB_DISABLE is not set"
    ]


def test_the_printer_shows_every_line_to_the_watch(tmp_path: Path) -> None:
    from gpuprov.launch import stream

    seen: list[tuple[str, str]] = []
    printer = stream.Printer(
        ["node1"], {"node1": tmp_path / "node1.log"}, watch=lambda h, t: seen.append((h, t))
    )
    printer.line("node1", "[rank0]:" + lines("ib-no-device.log")[0])
    printer.close()
    assert seen == [("node1", "[rank0]:" + lines("ib-no-device.log")[0])]
