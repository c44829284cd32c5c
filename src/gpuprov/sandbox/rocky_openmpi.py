"""Stand-ins for Rocky 9's `openmpi` and `environment-modules` rpms, for the sandbox's rocky-like nodes.

As with podman (gpuprov.sandbox.rocky_podman), Rocky's own binaries would not run on the rocky-like node
(Debian 12's rootfs), so each stand-in has Rocky's name and version and carries Debian 12's real files
unchanged: Open MPI 4.1.4 (openmpi-bin, openmpi-common, libopenmpi3) with what it needs on top of the node
image, and environment-modules 5.2.0 with Tcl. Where EL's layout differs from Debian's, the stand-in adds
EL's paths.

Recorded facts (EL 9's openmpi.spec as synced from git.centos.org into redsleeve-linux/el9,
AppStream/openmpi/SPECS/openmpi.spec: commit 5ce00a7 for EL 9.0, 9e5afce for EL 9.3, unchanged at bff65bd
"last updates for 9.7"):
- name and version: `openmpi`, Epoch 2, 4.1.1, Release 7.el9 since EL 9.3 (changelog "2:4.1.1-7 Increase
  Epoch tag", 2023-07-21); EL 9.0 to 9.2 shipped 1:4.1.1-5.el9. Rocky keeps only the current minor release's
  builds, so a Rocky 9 host installs 2:4.1.1-7.el9.
- layout: `configure --prefix=/usr/lib64/openmpi --sysconfdir=/etc/openmpi-x86_64`; `%files` has
  bin/mpi[er]*, bin/ompi*, bin/orte[-dr_]*, oshmem_info, oshrun, shmemrun under /usr/lib64/openmpi/bin and
  `%config(noreplace) /etc/openmpi-x86_64/*`; nothing on PATH.
- the environment-modules file /usr/share/modulefiles/mpi/openmpi-x86_64, openmpi.module.in with the spec's
  substitutions (python2 off on EL >= 8, so its two @PY2SITEARCH@ lines are deleted).
- `Provides: mpi`, `Requires: environment(modules)` and `openssh-clients`.
- environment-modules provides `environment(modules)` and is configured
  `--with-modulepath=/usr/share/Modules/modulefiles:/etc/modulefiles:/usr/share/modulefiles` (the
  Fedora-derived spec EL builds from; microsoft/azurelinux SPECS/environment-modules/environment-modules.spec,
  from Fedora 38). No EL 9 environment-modules version string was recorded: the stand-in keeps Debian's.
- OPENMPI_ADDS and MODULES_ADDS: what `apt-get install -s --no-install-recommends openmpi-bin openmpi-common
  libopenmpi3 environment-modules` installs on top of the rocky9 node image's dpkg status (2026-11-26).

Not reproduced: the libraries stay at Debian's paths (/usr/lib/x86_64-linux-gnu; EL's are under
/usr/lib64/openmpi/lib), the system MCA file is Debian's (its btl/pml/mtl exclusions, which these Debian-built
components need; EL's has only upstream's comments), and `openssh-clients` is not required (the node's ssh
client is Debian's, outside the rpm database).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from gpuprov.sandbox.rocky_podman import package_from_debs
from gpuprov.sandbox.standins import Entry, File, Link, Package, Pin

EPOCH, VERSION, RELEASE = 2, "4.1.1", "7.el9"
MODULES_VERSION = ("5.2.0", "1.gpuprov_sandbox")  # Debian 12's environment-modules 5.2.0-1, carried unchanged
OPENMPI_ADDS: tuple[str, ...] = (
    "openmpi-bin", "openmpi-common", "libopenmpi3", "libnl-3-200", "libnl-route-3-200", "libibverbs1",
    "ibverbs-providers", "libatomic1", "libevent-core-2.1-7", "libevent-pthreads-2.1-7", "libpsm-infinipath1",
    "libnuma1", "libpsm2-2", "librdmacm1", "libfabric1", "libpciaccess0", "libxau6", "libxdmcp6", "libxcb1",
    "libx11-data", "libx11-6", "libxext6", "libxnvctrl0", "ocl-icd-libopencl1", "libhwloc15",
    "libhwloc-plugins", "libmunge2", "libpmix2", "libucx0",
)  # fmt: skip
MODULES_ADDS: tuple[str, ...] = ("environment-modules", "tcl8.6", "libtcl8.6")
# What libpsm-infinipath1's postinst makes with update-alternatives (maintainer scripts do not run here); Open
# MPI's psm and ofi components load it. openmpi-bin's own alternatives (/usr/bin/mpirun ...) are left out: EL
# puts nothing on PATH.
_ALTERNATIVES = (
    Link("/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1", "/usr/lib/libpsm1/libpsm_infinipath.so.1.16"),
)
# The packages' files the mirror needs from Debian's archive (gpuprov.sandbox.debian_archive downloads them).
DEBIAN_PACKAGES = ("environment-modules",)

PREFIX = "/usr/lib64/openmpi"
SYSCONFDIR = "/etc/openmpi-x86_64"
MODULE_FILE = "/usr/share/modulefiles/mpi/openmpi-x86_64"
# EL's bin/ names (the spec's %files globs) and the Debian program each one is.
_EL_PROGRAMS = {
    "mpirun": "orterun", "mpiexec": "orterun", "orterun": "orterun", "orted": "orted",
    "orte-clean": "orte-clean", "orte-info": "orte-info", "orte-server": "orte-server",
    "ompi-clean": "orte-clean", "ompi-server": "orte-server", "ompi_info": "ompi_info",
    "oshmem_info": "oshmem_info", "oshrun": "orterun", "shmemrun": "orterun",
}  # fmt: skip
# openmpi.module.in (EL 9) with the spec's sed: LIBDIR, ETCDIR, FMODDIR, INCDIR, MANDIR, PY3SITEARCH (EL 9's
# python3.9), COMPILER and SUFFIX; the @PY2SITEARCH@ lines deleted.
MODULE_TEXT = f"""\
#%Module 1.0
#
#  OpenMPI module for use with 'environment-modules' package:
#
conflict\t\tmpi
prepend-path \t\tPATH \t\t{PREFIX}/bin
prepend-path \t\tLD_LIBRARY_PATH {PREFIX}/lib
prepend-path \t\tPKG_CONFIG_PATH\t{PREFIX}/lib/pkgconfig
prepend-path\t\tMANPATH\t\t:/usr/share/man/openmpi-x86_64
setenv \t\t\tMPI_BIN\t\t{PREFIX}/bin
setenv\t\t\tMPI_SYSCONFIG\t{SYSCONFDIR}
setenv\t\t\tMPI_FORTRAN_MOD_DIR\t/usr/lib64/gfortran/modules/openmpi
setenv\t\t\tMPI_INCLUDE\t/usr/include/openmpi-x86_64
setenv\t \t\tMPI_LIB\t\t{PREFIX}/lib
setenv\t\t\tMPI_MAN\t\t/usr/share/man/openmpi-x86_64
setenv\t\t\tMPI_PYTHON3_SITEARCH\t/usr/lib64/python3.9/site-packages/openmpi
setenv\t\t\tMPI_COMPILER\topenmpi-x86_64
setenv\t\t\tMPI_SUFFIX\t_openmpi
setenv\t \t\tMPI_HOME\t{PREFIX}
"""
# environment-modules' modulespath as EL configures it (one directory a line, as --enable-modulespath writes).
MODULESPATH_FILE = "/etc/environment-modules/modulespath"
MODULESPATH_TEXT = "/usr/share/Modules/modulefiles\n/etc/modulefiles\n/usr/share/modulefiles\n"


def openmpi_package(debs: Sequence[Path]) -> Package:
    """The stand-in `openmpi` rpm: Debian's Open MPI and libraries, with EL's bin/, sysconfdir and module."""
    summary = "Rocky 9's openmpi name and version carrying Debian 12's Open MPI 4.1.4 and its libraries"
    evr = (EPOCH, VERSION, RELEASE)
    package = package_from_debs(debs, OPENMPI_ADDS, "openmpi", evr, summary, _ALTERNATIVES)
    return dataclasses.replace(
        package,
        entries=_el_layout(package.entries),
        depends=((Pin("environment(modules)", ""),),),
        provides=(Pin("mpi", ""),),
    )


def environment_modules_package(debs: Sequence[Path]) -> Package:
    """The stand-in `environment-modules` rpm: Debian's with Tcl, EL's module path, `environment(modules)`."""
    summary = "Debian 12's environment-modules 5.2.0 and Tcl 8.6 under EL's module path"
    package = package_from_debs(debs, MODULES_ADDS, "environment-modules", (0, *MODULES_VERSION), summary, ())
    entries = [e for e in package.entries if e.path != MODULESPATH_FILE]
    entries.append(File(MODULESPATH_FILE, MODULESPATH_TEXT.encode()))
    return dataclasses.replace(package, entries=tuple(entries), provides=(Pin("environment(modules)", ""),))


def _el_layout(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """Debian's /etc/openmpi files moved to EL's sysconfdir (a link keeps the binaries' compiled-in path
    working), EL's bin/ as links to Debian's programs, and EL's module file."""
    laid_out: list[Entry] = []
    for entry in entries:
        if entry.path.startswith("/etc/openmpi/"):
            moved = SYSCONFDIR + entry.path[len("/etc/openmpi") :]
            entry = dataclasses.replace(entry, path=moved)
        laid_out.append(entry)
    laid_out.append(Link("/etc/openmpi", SYSCONFDIR.rsplit("/", 1)[1]))
    laid_out += [Link(f"{PREFIX}/bin/{name}", f"/usr/bin/{prog}") for name, prog in _EL_PROGRAMS.items()]
    laid_out.append(File(MODULE_FILE, MODULE_TEXT.encode()))
    return tuple(laid_out)
