"""The rocky-like nodes' stand-in podman rpm: Rocky's name and version, Debian's files under /usr."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.sandbox import rocky_podman
from tests.unit.sandbox.debs import build_deb as _deb


def test_rockys_name_and_version() -> None:
    # Rocky Linux 9.4's AppStream podman, RLSA-2024:8039.
    assert (rocky_podman.EPOCH, rocky_podman.VERSION, rocky_podman.RELEASE) == (4, "4.9.4", "13.el9_4")


def test_the_package_carries_the_debs_files_under_usr(tmp_path: Path) -> None:
    debs = [
        _deb(tmp_path, name, {f"/lib/systemd/system/{name}.service": name, f"/usr/share/doc/{name}/x": "doc"})
        for name in rocky_podman.ROCKY_NODE_ADDS
    ]
    debs.append(_deb(tmp_path, "unrelated", {"/usr/bin/unrelated": "no"}))
    package = rocky_podman.podman_package(debs)
    paths = {entry.path for entry in package.entries}
    assert "/usr/lib/systemd/system/podman.service" in paths
    assert "/usr/sbin/iptables" in paths  # the alternatives link iptables' postinst would make
    assert not any(p.startswith(("/lib/", "/usr/share/doc/")) or "unrelated" in p for p in paths)
    assert (package.name, package.evr) == ("podman", "4:4.9.4-13.el9_4")


def test_a_missing_debian_package_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="conmon"):
        rocky_podman.podman_package([_deb(tmp_path, "podman", {"/usr/bin/podman": "x"})])


def test_runc_is_a_package_of_its_own(tmp_path: Path) -> None:
    debs = [_deb(tmp_path, name, {f"/usr/sbin/{name}": name}) for name in rocky_podman.ROCKY_NODE_ADDS]
    podman = {entry.path for entry in rocky_podman.podman_package(debs).entries}
    runc = rocky_podman.runc_package(debs)
    assert "/usr/sbin/runc" not in podman
    assert [entry.path for entry in runc.entries] == ["/usr/sbin/runc"]
    assert (runc.name, runc.evr) == ("runc", "1.1.5-1.gpuprov_sandbox")
