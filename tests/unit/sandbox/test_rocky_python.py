"""The rocky-like nodes' stand-in python3.11 rpm: Rocky 9.4's name, version and path, Debian's interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.sandbox import rocky_python
from gpuprov.sandbox.standins import File
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
