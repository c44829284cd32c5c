"""Stand-ins for Ubuntu 22.04's Open MPI packages, for the sandbox's ubuntu-like nodes.

The ubuntu-like node is Debian 12's rootfs and Ubuntu's archive is not reachable here; like the container
engines (molecule/container_runtime), the node takes its libraries from the mirror's copy of Debian's archive.
Open MPI is what the mpi role pins by exact version, so Debian's 4.1.4-3 would not stand in for Ubuntu's
4.1.2-2ubuntu1: these stand-ins are Debian 12's real openmpi-bin, openmpi-common and libopenmpi3 .debs,
unchanged (files, maintainer scripts, the update-alternatives link of /usr/bin/mpirun, the conffiles) except
for the control file: Ubuntu's version, and relations between the three at that version. They are served as
the mirror's `ubuntu/jammy/` repository (Release Origin "Ubuntu"), and the node's apt preferences keep the
Debian copy's Open MPI out (molecule/mpi/prepare.yml), so apt sees only Ubuntu's version, as on Ubuntu.

Recorded facts:
- Ubuntu 22.04 (jammy/universe) ships Open MPI 4.1.2 as openmpi-bin, openmpi-common and libopenmpi3
  4.1.2-2ubuntu1 (roles/mpi/vars/Ubuntu-22.yml names the apt output it was read from; open-mpi/ompi#12476:
  4.1.2 from `apt-get install openmpi-bin` on Ubuntu 22.04.3).
- Ubuntu's openmpi is Debian's packaging with an Ubuntu delta (Ubuntu's manpages name the binary packages
  openmpi-bin_4.1.4-2ubuntu2, _4.1.4-3ubuntu2, _4.1.5-3ubuntu1, _4.1.6-7ubuntu2 across releases,
  manpages.ubuntu.com), so the layout is Debian's: /usr/bin/mpirun.openmpi -> orterun, /usr/bin/orted,
  /etc/openmpi/openmpi-mca-params.conf.

Not reproduced: `ompi_info --version` says 4.1.4 (Debian's binaries), and the packages' other dependencies
stay Debian 12's library names (the binaries need them), served by the Debian copy.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

VERSION = "4.1.2-2ubuntu1"
PACKAGES = ("openmpi-bin", "openmpi-common", "libopenmpi3")
REPO_DIR = "ubuntu/jammy"
SUITE = "jammy"
ORIGIN = ("Ubuntu", "Ubuntu", "gpuprov sandbox: Ubuntu 22.04's Open MPI versions carrying Debian 12's")
_NOTE = (
    " .\n gpuprov sandbox stand-in: Debian 12's package of this name, its files unchanged, under Ubuntu"
    f" 22.04's version {VERSION}.\n"
)


def reversioned(debs: Sequence[Path], out_dir: Path) -> list[Path]:
    """The .debs of PACKAGES among `debs`, rebuilt into out_dir with Ubuntu's version."""
    chosen = {d.name.split("_", 1)[0]: d for d in debs if d.name.split("_", 1)[0] in PACKAGES}
    missing = set(PACKAGES) - set(chosen)
    if missing:
        raise ValueError(f"the Debian packages {', '.join(sorted(missing))} were not downloaded")
    out_dir.mkdir(parents=True, exist_ok=True)
    return [_reversion(chosen[name], out_dir) for name in PACKAGES]


def control_for_ubuntu(control: str) -> str:
    """Debian's control file with Ubuntu's Version, no binNMU Source version, the relations between the
    three packages at Ubuntu's version (a full version stays full, an upstream one stays upstream) and a
    note in the description."""
    upstream = VERSION.split("-", 1)[0]

    def relation(match: re.Match[str]) -> str:
        name, operator, version = match.group(1), match.group(2), match.group(3)
        return f"{name} ({operator} {VERSION if '-' in version else upstream})"

    names = "|".join(re.escape(n) for n in PACKAGES)
    lines = []
    for line in control.splitlines():
        if line.startswith("Version:"):
            line = f"Version: {VERSION}"
        elif line.startswith("Source:"):
            line = "Source: openmpi"
        elif line.startswith(("Depends:", "Pre-Depends:", "Recommends:", "Breaks:", "Replaces:")):
            line = re.sub(rf"\b({names}) \(([<>=]+) ([^)]+)\)", relation, line)
        lines.append(line)
    return "\n".join(lines) + "\n" + _NOTE


def _reversion(deb: Path, out_dir: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True, capture_output=True)
        control = tree / "DEBIAN" / "control"
        control.write_text(control_for_ubuntu(control.read_text()))
        name, _version, rest = deb.name.split("_", 2)
        out = out_dir / f"{name}_{VERSION}_{rest}"  # rest: the architecture and .deb
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(tree), str(out)],
            check=True,
            capture_output=True,
        )
    return out
