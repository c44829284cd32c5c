"""Real Debian 12 packages the sandbox's debian12 nodes install from the mirror (no stand-ins here).

The test hosts cannot reach Debian's archive, so the mirror carries a small part of it: the packages of
PACKAGES and every package they depend on, downloaded unchanged on the build machine with
`apt-get download` (the build machine is Debian 12 with Debian's archive configured; see
/work/shared/ENVIRONMENT.md). They form one flat apt repository at http://MIRROR/debian/ whose Release is
signed with the sandbox key; the sandbox writes a source for it on each debian12 node
(gpuprov.sandbox.cluster), standing in for the Debian archive entry a real Debian host has.

Recorded facts (Debian bookworm, https://packages.debian.org/bookworm/slurmd and .../munge):
- slurmctld, slurmd, slurm-client 22.05.8-4+deb12u3 and munge 0.5.15-2+deb12u1 are bookworm's versions
  (bookworm/main and bookworm-security, `apt-cache policy` on the build machine, 2026-11).
- slurmd and slurmctld depend on slurm-wlm-basic-plugins (= the same version), munge and ucf; the plugins
  package's preinst adds the `slurm` system user (uid 64030).
- openmpi-bin and libopenmpi3 4.1.4-3+b1 and openmpi-common 4.1.4-3 are bookworm's (bookworm/main,
  `apt-cache policy`, 2026-11-26); openmpi-bin depends on libopenmpi3, openmpi-common and
  openssh-client | ssh-client.
- slurmdbd 22.05.8-4+deb12u3 is bookworm's (bookworm/main and bookworm-security, `apt-cache policy`,
  2026-11-26); it depends on slurm-wlm-basic-plugins, slurm-wlm-mysql-plugin, munge and ucf.
- mariadb-server 1:10.11.19-0+deb12u1 is bookworm's (bookworm-security; bookworm/main has
  1:10.11.18-0+deb12u1, `apt-cache policy`, 2026-11-26); it depends on mariadb-client, mariadb-server-core,
  galera-4 and perl.
- environment-modules 5.2.0-1 is bookworm's (bookworm/main, `apt-cache policy`, 2026-11-26); it depends on
  tcl8.6 and libtcl8.6.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpuprov import console
from gpuprov.errors import EnvironmentProblem

# The packages the mpi role installs on Debian 12 (roles/mpi/vars/Debian-12.yml): Open MPI 4.1.4, and through
# the closure what running it needs (libopenmpi3's libpmix2, libhwloc15, libevent, libfabric1, libucx0 ...).
OPENMPI_PACKAGES: tuple[str, ...] = ("openmpi-bin", "openmpi-common", "libopenmpi3")

# The slurm_pyxis role's packages on Debian 12: what building pyxis needs (roles/slurm_pyxis/vars/Debian.yml),
# and what enroot's release packages depend on (enroot 4.1.2's pkg/deb/control: enroot needs bash, curl,
# gawk | mawk, jq, parallel, passwd, squashfs-tools, zstd, bsdmainutils; enroot+caps needs libcap2-bin).
ENROOT_PYXIS_PACKAGES: tuple[str, ...] = (
    "gcc", "libc6-dev", "make", "libslurm-dev",
    "curl", "gawk", "jq", "parallel", "squashfs-tools", "zstd", "bsdmainutils", "libcap2-bin",
)  # fmt: skip

# The packages the slurm role installs on Debian 12 (roles/slurm/vars/Debian.yml); the repository holds
# them and their whole dependency closure, so it does not depend on what a node image happens to contain.
PACKAGES: tuple[str, ...] = (
    "slurmctld", "slurmd", "slurm-client", "munge",
    # Slurm's accounting (the slurm role's accounting.yml): slurmdbd and the database it keeps jobs in.
    "slurmdbd", "mariadb-server",
    # The container_runtime role's engines (roles/container_runtime/vars/Debian.yml) and runc, the OCI
    # runtime a nested engine needs (crun fails on the build machine's hybrid cgroups); catatonit, which
    # Debian's podman only recommends and its --init needs (/usr/libexec/podman/catatonit).
    "docker.io", "podman", "runc", "catatonit",
    *OPENMPI_PACKAGES,
    # The rocky-like nodes' stand-in environment-modules rpm carries Debian's (gpuprov.sandbox.rocky_openmpi).
    "environment-modules",
    *ENROOT_PYXIS_PACKAGES,
)  # fmt: skip
REPO_DIR = "debian"
PURPOSE = "copying Debian packages for the sandbox"
SUITE = "bookworm"
ORIGIN = "Debian"
LABEL = "Debian"
DESCRIPTION = (
    "gpuprov sandbox: Debian 12 packages for the slurm and mpi roles, copied unchanged from Debian's archive"
)

# What the apt dependency walk follows: what must be installed, nothing optional.
_DEPENDS_ONLY = (
    "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
    "--no-enhances",
)  # fmt: skip


def closure(packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """The packages and all they depend on (virtual names, shown as <name> by apt-cache, left out)."""
    proc = _apt(["apt-cache", "depends", *_DEPENDS_ONLY, *packages])
    names = {line.strip() for line in proc.stdout.splitlines() if line and not line[0].isspace()}
    return sorted(name for name in names if not name.startswith("<"))


def download(directory: Path, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    """The .debs of closure(packages), downloaded into directory (best empty: all its .debs are returned)."""
    directory.mkdir(parents=True, exist_ok=True)
    # apt's sandbox user cannot write into root's cache; apt falls back to root with a warning otherwise.
    _apt(["apt-get", "-q", "-o", "APT::Sandbox::User=root", "download", *closure(packages)], cwd=directory)
    return sorted(directory.glob("*.deb"))


def _apt(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    console.detail("$ " + " ".join(cmd))
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise EnvironmentProblem(f"{PURPOSE}: cannot run {cmd[0]}: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise EnvironmentProblem(
            f"{PURPOSE}: '{' '.join(cmd[:2])}' failed: {last} "
            "(this machine needs Debian 12's archive in its apt sources and `apt-get update` done)"
        )
    return proc


# On each debian12 node: the source for the mirror's copy (deb822, flat repository: Suites ends in "/" and
# there are no Components, sources.list(5)), trusting only the sandbox key for it. "mirror" is the mirror
# container's alias on the sandbox network, so the entry outlives a re-created mirror's new address.
NODE_SOURCE_FILE = "etc/apt/sources.list.d/gpuprov-sandbox-debian.sources"
NODE_KEY_FILE = "etc/apt/keyrings/gpuprov-sandbox.asc"
NODE_OSES = ("debian12",)


def node_source(base_url: str = "http://mirror") -> str:
    return (
        "# Written by `gpuprov sandbox up`: part of Debian 12's archive (real packages), served by the\n"
        "# sandbox mirror because the test hosts cannot reach Debian's own.\n"
        "Types: deb\n"
        f"URIs: {base_url}/{REPO_DIR}/\n"
        "Suites: ./\n"
        f"Signed-By: /{NODE_KEY_FILE}\n"
    )
