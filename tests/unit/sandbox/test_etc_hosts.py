"""The sandbox nodes' /etc/hosts: a stock Debian/Ubuntu install's, byte for byte, on those OSes only."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from gpuprov.sandbox import docker, etc_hosts


def test_the_stock_file_maps_the_hostname_to_127_0_1_1_as_netcfg_writes_it() -> None:
    assert etc_hosts.stock("node1") == (
        "127.0.0.1\tlocalhost\n"
        "127.0.1.1\tnode1\n"
        "\n"
        "# The following lines are desirable for IPv6 capable hosts\n"
        "::1     localhost ip6-localhost ip6-loopback\n"
        "ff02::1 ip6-allnodes\n"
        "ff02::2 ip6-allrouters\n"
    )


@pytest.mark.parametrize(
    ("os_name", "written"), [("debian12", True), ("ubuntu22.04", True), ("rocky9", False)]
)
def test_written_over_dockers_file_on_debian_and_ubuntu_nodes(
    monkeypatch: pytest.MonkeyPatch, os_name: str, written: bool
) -> None:
    calls: list[tuple[tuple[str, ...], Any]] = []

    def run(*args: str, input: bytes | None = None, **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append((args, input))
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(docker, "run", run)
    etc_hosts.write("gpuprov-s-node2", os_name, "node2")
    if written:
        assert calls == [
            (
                ("exec", "-i", "gpuprov-s-node2", "sh", "-c", "cat > /etc/hosts"),
                etc_hosts.stock("node2").encode(),
            )
        ]
    else:
        assert calls == []
