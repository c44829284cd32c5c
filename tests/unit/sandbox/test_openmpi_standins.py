"""The Open MPI stand-ins: Rocky 9's openmpi and environment-modules rpms, Ubuntu 22.04's and 24.04's .debs.

Each carries Debian 12's files; the facts they reproduce are recorded in gpuprov.sandbox.rocky_openmpi and
gpuprov.sandbox.ubuntu_openmpi with their sources, and these tests hold the stand-ins to them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuprov.sandbox import rocky_openmpi, ubuntu_openmpi
from gpuprov.sandbox.standins import File, Link
from tests.unit.sandbox.debs import build_deb as _deb


def test_rocky_9s_openmpi_name_and_version() -> None:
    # EL 9's openmpi.spec from EL 9.3 on (redsleeve-linux/el9, synced from git.centos.org): Epoch 2, 4.1.1-7.
    assert (rocky_openmpi.EPOCH, rocky_openmpi.VERSION, rocky_openmpi.RELEASE) == (2, "4.1.1", "7.el9")


def test_the_openmpi_rpm_has_els_layout_over_debians_files(tmp_path: Path) -> None:
    files = {
        name: {f"/usr/share/doc/{name}/x": "doc", f"/usr/lib/{name}.so": name}
        for name in rocky_openmpi.OPENMPI_ADDS
    }
    files["openmpi-bin"].update(
        {"/usr/bin/orterun": "orterun", "/etc/openmpi/openmpi-mca-params.conf": "btl = ^x\n"}
    )
    debs = [_deb(tmp_path, name, content) for name, content in files.items()]
    package = rocky_openmpi.openmpi_package(debs)
    entries = {entry.path: entry for entry in package.entries}
    assert (package.name, package.evr) == ("openmpi", "2:4.1.1-7.el9")
    # EL's sysconfdir holds the file; Debian's compiled-in /etc/openmpi leads there.
    assert isinstance(entries["/etc/openmpi-x86_64/openmpi-mca-params.conf"], File)
    assert entries["/etc/openmpi"] == Link("/etc/openmpi", "openmpi-x86_64")
    assert "/etc/openmpi/openmpi-mca-params.conf" not in entries
    # mpirun by EL's absolute path: Open MPI then passes --prefix /usr/lib64/openmpi to the remote orted.
    assert entries["/usr/lib64/openmpi/bin/mpirun"] == Link(
        "/usr/lib64/openmpi/bin/mpirun", "/usr/bin/orterun"
    )
    assert "/usr/lib64/openmpi/bin/orted" in entries
    # The link libpsm-infinipath1's postinst would make (its components load it).
    assert isinstance(entries["/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1"], Link)
    assert not any(p.startswith("/usr/share/doc/") for p in entries)
    assert [p.name for (p,) in package.depends] == ["environment(modules)"]
    assert [p.name for p in package.provides] == ["mpi"]


def test_the_module_file_is_els_template_with_the_specs_substitutions() -> None:
    text = rocky_openmpi.MODULE_TEXT
    assert rocky_openmpi.MODULE_FILE == "/usr/share/modulefiles/mpi/openmpi-x86_64"
    assert text.startswith("#%Module 1.0\n")
    assert "prepend-path \t\tPATH \t\t/usr/lib64/openmpi/bin\n" in text
    assert "setenv\t\t\tMPI_SYSCONFIG\t/etc/openmpi-x86_64\n" in text
    assert (
        "@" not in text and "PYTHON2" not in text
    )  # every placeholder filled; python2 lines deleted on EL 9


def test_environment_modules_provides_the_virtual_name_and_els_module_path(tmp_path: Path) -> None:
    files = {name: {f"/usr/bin/{name}": name} for name in rocky_openmpi.MODULES_ADDS}
    files["environment-modules"][rocky_openmpi.MODULESPATH_FILE] = "/usr/share/modules/modulefiles\n"
    package = rocky_openmpi.environment_modules_package([_deb(tmp_path, n, f) for n, f in files.items()])
    modulespath = [e for e in package.entries if e.path == rocky_openmpi.MODULESPATH_FILE]
    assert len(modulespath) == 1 and isinstance(modulespath[0], File)
    assert modulespath[0].content.decode().splitlines() == [
        "/usr/share/Modules/modulefiles", "/etc/modulefiles", "/usr/share/modulefiles"
    ]  # fmt: skip
    assert [p.name for p in package.provides] == ["environment(modules)"]


# Debian 12's openmpi-bin control file as `dpkg-deb -f` shows it (4.1.4-3+b1, a binNMU).
_DEPENDS = (
    "libc6 (>= 2.34), libevent-core-2.1-7 (>= 2.1.8-stable), libopenmpi3 (>= 4.1.4), "
    "openmpi-common (>= 4.1.4-3), openssh-client | ssh-client"
)
_DEBIAN_CONTROL = f"""\
Package: openmpi-bin
Source: openmpi (4.1.4-3)
Version: 4.1.4-3+b1
Architecture: amd64
Maintainer: Alastair McKinstry <mckinstry@debian.org>
Depends: {_DEPENDS}
Description: high performance message passing library -- binaries
 This package contains the Open MPI utility programs.
"""


def test_ubuntus_version_and_relations_in_the_control_file() -> None:
    control = ubuntu_openmpi.control_for_ubuntu(_DEBIAN_CONTROL)
    assert "Version: 4.1.2-2ubuntu1\n" in control
    assert "Source: openmpi\n" in control
    # The three packages depend on each other at Ubuntu's version; the libraries stay Debian's.
    assert "libopenmpi3 (>= 4.1.2), openmpi-common (>= 4.1.2-2ubuntu1)" in control
    assert "libevent-core-2.1-7 (>= 2.1.8-stable)" in control
    assert control.endswith("under Ubuntu 22.04's name and version 4.1.2-2ubuntu1.\n")


def test_ubuntu_2404s_library_is_libopenmpi3t64_and_openmpi_bin_depends_on_it() -> None:
    # Ubuntu 24.04: openmpi-bin 4.1.6-7ubuntu2 and the library under its 64-bit time_t name.
    noble = ubuntu_openmpi.NOBLE
    control = ubuntu_openmpi.control_for_ubuntu(_DEBIAN_CONTROL, noble)
    assert "Package: openmpi-bin\n" in control
    assert "Version: 4.1.6-7ubuntu2\n" in control
    assert "libopenmpi3t64 (>= 4.1.6), openmpi-common (>= 4.1.6-7ubuntu2)" in control
    assert "libopenmpi3 " not in control
    library = ubuntu_openmpi.control_for_ubuntu(
        _DEBIAN_CONTROL.replace("openmpi-bin", "libopenmpi3", 1), noble
    )
    assert library.startswith("Package: libopenmpi3t64\n")
    assert (noble.repo_dir, noble.origin[0]) == ("ubuntu/noble", "Ubuntu")


def test_reversioned_debs_keep_their_files(tmp_path: Path) -> None:
    debs = [
        _deb(tmp_path, name, {f"/usr/bin/{name}": name}, _DEBIAN_CONTROL.replace("openmpi-bin", name, 1))
        for name in ubuntu_openmpi.DEBIAN_PACKAGES
    ]
    out = ubuntu_openmpi.reversioned(debs, tmp_path / "out")
    assert [p.name for p in out] == [f"{n}_4.1.2-2ubuntu1_amd64.deb" for n in ubuntu_openmpi.DEBIAN_PACKAGES]
    noble = ubuntu_openmpi.reversioned(debs, tmp_path / "noble", ubuntu_openmpi.NOBLE)
    assert [p.name for p in noble] == [
        "openmpi-bin_4.1.6-7ubuntu2_amd64.deb",
        "openmpi-common_4.1.6-7ubuntu2_amd64.deb",
        "libopenmpi3t64_4.1.6-7ubuntu2_amd64.deb",
    ]
    package = subprocess.run(
        ["dpkg-deb", "-f", str(noble[2]), "Package"], check=True, capture_output=True, text=True
    )
    assert package.stdout.strip() == "libopenmpi3t64"
    listing = subprocess.run(["dpkg-deb", "-c", str(out[0])], check=True, capture_output=True, text=True)
    assert "./usr/bin/openmpi-bin" in listing.stdout
    version = subprocess.run(
        ["dpkg-deb", "-f", str(out[0]), "Version"], check=True, capture_output=True, text=True
    )
    assert version.stdout.strip() == "4.1.2-2ubuntu1"


def test_a_missing_debian_package_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="libopenmpi3"):
        ubuntu_openmpi.reversioned([_deb(tmp_path, "openmpi-bin", {"/usr/bin/x": "x"})], tmp_path / "out")
