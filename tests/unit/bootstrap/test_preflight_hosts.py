"""Bootstrap preflight over many hosts: one host that hangs is reported, the others are checked."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuprov import host_preflight as preflight
from gpuprov import hosts


def test_a_hanging_host_is_an_ssh_problem_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def check_host(
        host: hosts.Host, extravars: Mapping[str, Any], also: object = None
    ) -> preflight.HostReport:
        if host.name == "node2":
            release.wait(10)
        return preflight.HostReport(host.name, "Debian GNU/Linux 12", ())

    monkeypatch.setattr(preflight, "check_host", check_host)
    monkeypatch.setattr(preflight, "HOST_TIMEOUT_S", 0.5)
    names = ["node1", "node2", "node3"]
    inventory = hosts.Inventory(
        Path("inventory.ini"),
        [hosts.Host(name, f"192.0.2.{i}", 22, "u", None, Path("/k")) for i, name in enumerate(names)],
    )
    try:
        reports, _ = preflight.run(inventory, {})
    finally:
        release.set()
    assert [r.host for r in reports] == names
    assert [r.problems for r in reports if r.host != "node2"] == [(), ()]
    assert reports[1].problems == (
        preflight.Problem("node2", "ssh", "the checks did not finish within 0.5 s; is the host overloaded?"),
    )
    assert preflight.exit_code(reports, []) == preflight.ExitCode.HOSTS_UNREACHABLE
