"""Stand-ins for Ubuntu 22.04's and 24.04's Open MPI packages, for the sandbox's ubuntu-like nodes.

The ubuntu-like node is Debian 12's rootfs and Ubuntu's archive is not reachable here; like the container
engines (molecule/container_runtime), the node takes its libraries from the mirror's copy of Debian's archive.
Open MPI is what the mpi role pins by exact version, so Debian's 4.1.4-3 would not stand in for Ubuntu's:
these stand-ins are Debian 12's real openmpi-bin, openmpi-common and libopenmpi3 .debs, unchanged (files,
maintainer scripts, the update-alternatives link of /usr/bin/mpirun, the conffiles) except for the control
file: Ubuntu's package name and version, and relations between the three at that version. Each release is
served as the mirror's `ubuntu/<codename>/` repository (Release Origin "Ubuntu"), and the node's apt
preferences keep the Debian copy's Open MPI out (molecule/mpi/prepare.yml), so apt sees only Ubuntu's
version, as on Ubuntu.

Recorded facts:
- Ubuntu 22.04 (jammy/universe) ships Open MPI 4.1.2 as openmpi-bin, openmpi-common and libopenmpi3
  4.1.2-2ubuntu1 (roles/mpi/vars/Ubuntu-22.yml names the apt output it was read from; `apt list` printing
  "libopenmpi3/jammy,now 4.1.2-2ubuntu1"; open-mpi/ompi#12476: 4.1.2 from `apt-get install openmpi-bin` on
  Ubuntu 22.04.3).
- Ubuntu 24.04 (noble/universe) ships Open MPI 4.1.6 as openmpi-bin and openmpi-common 4.1.6-7ubuntu2 and the
  library as libopenmpi3t64 4.1.6-7ubuntu2, the name the 64-bit time_t transition gave it
  (roles/mpi/vars/Ubuntu-24.yml; `apt list` printing "openmpi-bin/noble,now 4.1.6-7ubuntu2 amd64" and
  "openmpi-common/noble,noble,now 4.1.6-7ubuntu2 all"; an Ubuntu 24.04 image's list naming
  "libopenmpi3t64 4.1.6-7ubuntu2"; Debian's release team on "the content of libopenmpi3t64",
  lists.debian.org/debian-release/2024/11/msg00126.html).
- Ubuntu's openmpi is Debian's packaging with an Ubuntu delta (Ubuntu's manpages name the binary packages
  openmpi-bin_4.1.4-2ubuntu2, _4.1.4-3ubuntu2, _4.1.5-3ubuntu1, _4.1.6-7ubuntu2 across releases,
  manpages.ubuntu.com), so the layout is Debian's: /usr/bin/mpirun.openmpi -> orterun, /usr/bin/orted,
  /etc/openmpi/openmpi-mca-params.conf, with UCX turned off in it (charmed-hpc/docs
  explanation/interconnects/driver.md).

Not reproduced: `ompi_info --version` says 4.1.4 (Debian's binaries); the packages' other dependencies stay
Debian 12's library names (the binaries need them), served by the Debian copy; libopenmpi3t64's relations to
the old libopenmpi3 name (its Provides, Replaces and Breaks were not recorded, so it has none) and its
/usr/share/doc directory, which keeps Debian's name.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Debian 12's three packages, carried under each release's names.
DEBIAN_PACKAGES = ("openmpi-bin", "openmpi-common", "libopenmpi3")


@dataclass(frozen=True)
class Release:
    """One Ubuntu release's Open MPI: its codename, pretty name, package version and library package."""

    codename: str
    name: str
    version: str
    library: str  # libopenmpi3, or libopenmpi3t64 from 24.04 on

    @property
    def repo_dir(self) -> str:
        return f"ubuntu/{self.codename}"

    @property
    def origin(self) -> tuple[str, str, str]:
        return ("Ubuntu", "Ubuntu", f"gpuprov sandbox: {self.name}'s Open MPI versions carrying Debian 12's")

    def package_name(self, debian_name: str) -> str:
        return self.library if debian_name == "libopenmpi3" else debian_name


JAMMY = Release("jammy", "Ubuntu 22.04", "4.1.2-2ubuntu1", "libopenmpi3")
NOBLE = Release("noble", "Ubuntu 24.04", "4.1.6-7ubuntu2", "libopenmpi3t64")
RELEASES = (JAMMY, NOBLE)


def reversioned(debs: Sequence[Path], out_dir: Path, release: Release = JAMMY) -> list[Path]:
    """DEBIAN_PACKAGES among `debs`, rebuilt into out_dir under the release's names and version."""
    chosen = {d.name.split("_", 1)[0]: d for d in debs if d.name.split("_", 1)[0] in DEBIAN_PACKAGES}
    missing = set(DEBIAN_PACKAGES) - set(chosen)
    if missing:
        raise ValueError(f"the Debian packages {', '.join(sorted(missing))} were not downloaded")
    out_dir.mkdir(parents=True, exist_ok=True)
    return [_reversion(chosen[name], out_dir, release) for name in DEBIAN_PACKAGES]


def control_for_ubuntu(control: str, release: Release = JAMMY) -> str:
    """Debian's control file with the release's package name and Version, no binNMU Source version, the
    relations between the three packages under the release's names at its version (a full version stays
    full, an upstream one stays upstream) and a note in the description."""
    upstream = release.version.split("-", 1)[0]

    def relation(match: re.Match[str]) -> str:
        name, operator, version = match.group(1), match.group(2), match.group(3)
        wanted = release.version if "-" in version else upstream
        return f"{release.package_name(name)} ({operator} {wanted})"

    names = "|".join(re.escape(n) for n in DEBIAN_PACKAGES)
    lines = []
    for line in control.splitlines():
        if line.startswith("Package:"):
            line = f"Package: {release.package_name(line.split(':', 1)[1].strip())}"
        elif line.startswith("Version:"):
            line = f"Version: {release.version}"
        elif line.startswith("Source:"):
            line = "Source: openmpi"
        elif line.startswith(("Depends:", "Pre-Depends:", "Recommends:", "Breaks:", "Replaces:")):
            line = re.sub(rf"\b({names}) \(([<>=]+) ([^)]+)\)", relation, line)
        lines.append(line)
    note = (
        f" .\n gpuprov sandbox stand-in: Debian 12's package of this name, its files unchanged, under"
        f" {release.name}'s name and version {release.version}.\n"
    )
    return "\n".join(lines) + "\n" + note


def _reversion(deb: Path, out_dir: Path, release: Release) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True, capture_output=True)
        control = tree / "DEBIAN" / "control"
        control.write_text(control_for_ubuntu(control.read_text(), release))
        name, _version, rest = deb.name.split("_", 2)
        out = out_dir / f"{release.package_name(name)}_{release.version}_{rest}"  # rest: architecture, .deb
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(tree), str(out)],
            check=True,
            capture_output=True,
        )
    return out
