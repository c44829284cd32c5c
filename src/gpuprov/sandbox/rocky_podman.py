"""A stand-in for Rocky 9's podman package, for the sandbox's rocky-like nodes (no Rocky archive here).

The rocky-like node is Debian 12's rootfs with Debian's dnf and rpm and an empty rpm database
(gpuprov.sandbox.images), so Rocky's own podman binaries (built for Rocky's libraries) would not run there.
The stand-in is one rpm with Rocky's name and version string that carries Debian 12's real podman 4.3.1 and
what it needs on top of that rootfs, unchanged: the files of the Debian packages of ROCKY_NODE_ADDS. It is
served as the mirror's `rocky/9/AppStream/x86_64/os/` repository, where Rocky serves AppStream, next to
a `runc` rpm carrying Debian's runc (Rocky's AppStream has runc as a package of its own, podman's default
runtime on EL9 being crun).

Recorded facts:
- Rocky Linux 9.4's AppStream podman is `podman-4:4.9.4-13.el9_4` (Rocky Linux security advisory
  RLSA-2024:8039, https://errata.rockylinux.org/RLSA-2024:8039; its package list as quoted by Tenable's
  plugin 209690).
- ROCKY_NODE_ADDS: what `apt-get install -s --no-install-recommends podman runc` installs on top of the
  rocky9 node image's dpkg status (Debian 12 bookworm, 2026-11-26): podman 4.3.1+ds1-8+deb12u1+b3, conmon,
  golang-github-containers-common and -image, containernetworking-plugins, runc, libsubid4, iptables and
  its libraries. Their maintainer scripts do not run (iptables' update-alternatives links are made here).
- catatonit: EL9's podman rpm carries `/usr/libexec/podman/catatonit` itself (built from catatonit 0.1.7
  in its spec, `Provides: podman-catatonit`: podman-4.6.1-8.el9_3's SPECS/podman.spec, as rebuilt by
  openela-main/podman), so the stand-in carries Debian's catatonit package's file at that same path.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpuprov.sandbox.standins import Entry, File, Format, Link, Package

EPOCH, VERSION, RELEASE = 4, "4.9.4", "13.el9_4"
RUNC_VERSION = ("1.1.5", "1.gpuprov_sandbox")  # Debian 12's runc 1.1.5+ds1-1+deb12u1, carried unchanged
REPO_DIR = "rocky/9/AppStream/x86_64/os"
ROCKY_NODE_ADDS: tuple[str, ...] = (
    "podman", "conmon", "golang-github-containers-common", "golang-github-containers-image",
    "containernetworking-plugins", "runc", "libsubid4", "iptables", "libip6tc2", "libnfnetlink0",
    "libnetfilter-conntrack3", "catatonit",
)  # fmt: skip
# Documentation is left out: nothing reads it, and it is most of the files.
_SKIPPED = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/", "/usr/share/bash-completion/")
# Debian 12 is merged-/usr: the packages' /lib, /bin, /sbin paths are links there, so the rpm owns the /usr
# paths (rpm cannot put files under a directory that is a symlink it would have to own).
_MERGED = {"/lib/": "/usr/lib/", "/bin/": "/usr/bin/", "/sbin/": "/usr/sbin/"}
# What iptables' postinst makes with update-alternatives (the nft variant, Debian 12's default).
_ALTERNATIVES = (
    Link("/usr/sbin/iptables", "xtables-nft-multi"),
    Link("/usr/sbin/ip6tables", "xtables-nft-multi"),
)


def podman_package(debs: Sequence[Path]) -> Package:
    """The stand-in podman rpm from the .debs of ROCKY_NODE_ADDS among `debs`, runc left to runc_package."""
    names = tuple(n for n in ROCKY_NODE_ADDS if n != "runc")
    summary = "Rocky 9's podman name and version carrying Debian 12's podman 4.3.1 and its dependencies"
    return package_from_debs(debs, names, "podman", (EPOCH, VERSION, RELEASE), summary, _ALTERNATIVES)


def runc_package(debs: Sequence[Path]) -> Package:
    """Debian 12's runc as an rpm of the same name, for `container_runtime_oci_runtime: runc`. No Rocky 9
    runc version was recorded, so it carries Debian's version (RUNC_VERSION) with a sandbox release."""
    summary = "Debian 12's runc 1.1.5 as an rpm (no Rocky version string recorded)"
    return package_from_debs(debs, ("runc",), "runc", (0, *RUNC_VERSION), summary, ())


def package_from_debs(
    debs: Sequence[Path],
    names: tuple[str, ...],
    name: str,
    evr: tuple[int, str, str],
    summary: str,
    extra: tuple[Link, ...],
) -> Package:
    entries = {entry.path: entry for entry in debian_files(debs, names)}
    for link in extra:
        entries.setdefault(link.path, link)
    epoch, version, release = evr
    return Package(
        format=Format.RPM,
        name=name,
        version=version,
        release=release,
        summary=summary,
        entries=tuple(entries.values()),
        epoch=epoch,
    )


def debian_files(debs: Sequence[Path], names: tuple[str, ...]) -> list[Entry]:
    """The files and links of the .debs of `names` among `debs`, at their merged-/usr paths, without docs."""
    chosen = [d for d in debs if d.name.split("_", 1)[0] in names]
    missing = set(names) - {d.name.split("_", 1)[0] for d in chosen}
    if missing:
        raise ValueError(f"the Debian packages {', '.join(sorted(missing))} were not downloaded")
    entries: dict[str, Entry] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        for deb in chosen:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
        for path in sorted(tree.rglob("*")):
            installed = _installed_path("/" + str(path.relative_to(tree)))
            if (path.is_dir() and not path.is_symlink()) or installed.startswith(_SKIPPED):
                continue
            if path.is_symlink():
                entries[installed] = Link(installed, str(path.readlink()))
            else:
                entries[installed] = File(installed, path.read_bytes(), path.stat().st_mode & 0o7777)
    return list(entries.values())


def _installed_path(path: str) -> str:
    for prefix, merged in _MERGED.items():
        if path.startswith(prefix):
            return merged + path[len(prefix) :]
    return path
