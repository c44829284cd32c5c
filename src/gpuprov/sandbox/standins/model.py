"""The package model: a stand-in package, its files and links, and its dependencies on other stand-ins."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Format(enum.Enum):
    DEB = "deb"
    RPM = "rpm"

    @property
    def libdir(self) -> str:
        return "/usr/lib/x86_64-linux-gnu" if self is Format.DEB else "/usr/lib64"


@dataclass(frozen=True)
class File:
    path: str  # absolute path on the host that installs the package
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Link:
    path: str
    target: str  # relative, like the links in NVIDIA's packages


Entry = File | Link


@dataclass(frozen=True)
class Pin:
    """A dependency on exactly one version of another stand-in (or of a virtual name stand-ins provide).

    An empty evr depends on any version, as some of NVIDIA's packages do (the toolkit on its config
    packages, Ubuntu's driver metapackages on some of their parts).
    """

    name: str
    evr: str


@dataclass(frozen=True)
class Package:
    format: Format
    name: str
    version: str  # upstream version: "550.127.08"
    release: str  # Debian revision / rpm Release: "1", "1+cuda12.4"; "" for none
    summary: str  # what the real package is; the control file adds that this is a stand-in
    entries: tuple[Entry, ...]
    epoch: int = 0
    # Each item is a list of alternatives (apt "a (= 1) | b (= 1)"); rpm packages use single pins only.
    depends: tuple[tuple[Pin, ...], ...] = ()
    provides: tuple[Pin, ...] = ()
    conflicts: tuple[str, ...] = ()
    # Packages of one group cannot be installed together (branches of the driver, open and proprietary
    # kernel modules): apt gets Provides, Conflicts and Replaces on the group name, so switching works.
    exclusive_group: str = ""
    # A deb postinst script of the real package's, reproduced (ldconfig is added where libraries are).
    postinst: str = ""
    # Architecture "all" / noarch, like NVIDIA's config and keyring packages.
    arch_independent: bool = False

    @property
    def evr(self) -> str:
        """The full version as apt ("1:3.3.9", "550.127.08-1") and rpm ("1:3.3.9-1") write it."""
        epoch = f"{self.epoch}:" if self.epoch else ""
        release = f"-{self.release}" if self.release else ""
        return f"{epoch}{self.version}{release}"

    @property
    def runs_ldconfig(self) -> bool:
        return any(".so." in e.path.rsplit("/", 1)[-1] for e in self.entries if isinstance(e, File))


def exact(package: Package) -> tuple[Pin, ...]:
    return (Pin(package.name, package.evr),)
