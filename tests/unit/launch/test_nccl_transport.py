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
    "name", ["socket-fallback-on-ib-host.log", "ib-no-device.log", "socket-channels.log"]
)
def test_sockets_are_recognised(name: str) -> None:
    assert any(nccl_transport.fell_back_to_sockets(line) for line in lines(name))


def test_ib_in_use_is_not_a_fallback_even_with_its_socket_interface_listed() -> None:
    assert not [line for line in lines("ib-in-use.log") if nccl_transport.fell_back_to_sockets(line)]


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
