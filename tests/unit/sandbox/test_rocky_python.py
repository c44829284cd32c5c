"""The rocky-like nodes' stand-in python3.11 rpm: Rocky 9.4's name, version and path, Debian's interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov import python_fit
from gpuprov.sandbox import inventory, rocky_python
from gpuprov.sandbox.standins import File
from tests.unit.sandbox.test_inventory_and_keys import context
from tests.unit.sandbox.test_rocky_podman import _deb


def test_rockys_name_version_and_path() -> None:
    # RHEL 9.4 AppStream (EUS): python3.11-3.11.7-1.el9_4.7.x86_64; the command python3.11 (RHEL 9 Table 1.1).
    assert (rocky_python.NAME, rocky_python.VERSION, rocky_python.RELEASE) == (
        "python3.11",
        "3.11.7",
        "1.el9_4.7",
    )
    assert rocky_python.INTERPRETER == "/usr/bin/python3.11"


def test_the_package_carries_debians_interpreter_only(tmp_path: Path) -> None:
    deb = _deb(
        tmp_path,
        "python3.11-minimal",
        {
            "/usr/bin/python3.11": "ELF",
            "/usr/share/binfmts/python3.11": "x",
            "/usr/share/doc/python3.11/y": "d",
        },
    )
    package = rocky_python.python_package([deb, _deb(tmp_path, "other", {"/usr/bin/python3.11": "no"})])
    assert [(e.path, e.content) for e in package.entries if isinstance(e, File)] == [
        ("/usr/bin/python3.11", b"ELF")
    ]
    assert len(package.entries) == 1
    assert (package.name, package.evr) == ("python3.11", "3.11.7-1.el9_4.7")


def test_a_deb_without_the_interpreter_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no /usr/bin/python3\.11"):
        rocky_python.python_package([_deb(tmp_path, "python3.11-minimal", {"/usr/bin/other": "x"})])


def test_the_sandbox_inventory_lets_the_role_choose_where_the_os_facts_hold(tmp_path: Path) -> None:
    # The wheel index is cp311 only; only the ubuntu-like node (Ubuntu 22.04's python3 is 3.10, its Debian
    # rootfs has 3.11) pins the version. Then every node's choice is 3.11, the rocky9 one from AppStream.
    nodes = [
        inventory.NodeEntry("node1", "10.0.0.2", "debian12"),
        inventory.NodeEntry("node2", "10.0.0.3", "ubuntu22.04"),
        inventory.NodeEntry("node3", "10.0.0.4", "rocky9"),
    ]
    text = inventory.render(nodes, context(tmp_path))
    host_lines = [line for line in text.splitlines() if line.startswith("node")]
    assert ["python_env_python_version=3.11" in line for line in host_lines] == [False, True, False]
    assert "python_env_wheel_pythons=['3.11']" in text.splitlines()
    facts = python_fit.load_facts()
    stack = {"gpu_stack": {"pytorch_version": "2.13.0"}, "python_env_wheel_pythons": ["3.11"]}
    for os_release, name, extra in (
        (("debian", "12"), "Debian", {}),
        (("ubuntu", "22.04"), "Ubuntu", {"python_env_python_version": "3.11"}),
        (("rocky", "9.4"), "Rocky", {}),
    ):
        assert python_fit.host_problem("n", os_release, name, {**stack, **extra}, facts) == ""


def test_rocky_nodes_get_the_mirrors_appstream_with_the_sandbox_key() -> None:
    repo = rocky_python.node_repo("http://mirror")
    assert "baseurl=http://mirror/rocky/9/AppStream/x86_64/os/\n" in repo
    # Rocky 9's rocky.repo [appstream]: gpgcheck=1 and a gpgkey file, no repo_gpgcheck.
    assert "\ngpgcheck=1\n" in repo and "repo_gpgcheck" not in repo
    assert f"gpgkey=file:///{rocky_python.NODE_KEY_FILE}\n" in repo
    assert repo.count("[appstream]") == 1
