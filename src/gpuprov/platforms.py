"""gpuprov's one table of supported operating systems, `roles/gpuprov_platform/vars/main.yml`.

The roles check each host against it (the gpuprov_platform role, a dependency of every role) and
`gpuprov bootstrap`'s preflight checks /etc/os-release against the same file, so both accept the same
hosts. A version matches when it is one of the entry's versions, or its major version is (Ubuntu is listed
by release, "22.04"; the others by major version, "9").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import yaml

from gpuprov import resources

TABLE = ("gpuprov_platform", "vars", "main.yml")
TABLE_KEY = "__gpuprov_platform_supported"


@dataclass(frozen=True)
class Platform:
    distribution: str  # Ansible's `distribution` fact: "Ubuntu", "RedHat"
    os_release_id: str  # ID= in /etc/os-release: "ubuntu", "rhel"
    versions: tuple[str, ...]  # "22.04" (Ubuntu) or a major version "9"
    galaxy: tuple[str, tuple[str, ...]]  # the meta/main.yml platform it is listed under: ("EL", ("8", "9"))

    def accepts(self, version: str) -> bool:
        return version in self.versions or version.split(".")[0] in self.versions


@functools.cache
def supported() -> tuple[Platform, ...]:
    """The table's entries, in its order."""
    path = resources.data_dir("roles").joinpath(*TABLE)
    table = yaml.safe_load(path.read_text(encoding="utf-8"))[TABLE_KEY]
    return tuple(
        Platform(
            distribution=name,
            os_release_id=str(entry["os_release_id"]),
            versions=tuple(str(v) for v in entry["versions"]),
            galaxy=(str(entry["galaxy"]["name"]), tuple(str(v) for v in entry["galaxy"]["versions"])),
        )
        for name, entry in table.items()
    )


def describe() -> str:
    """'Ubuntu 20.04/22.04/24.04, Debian 12, Rocky 8/9, RedHat 8/9' (the names the roles' message uses)."""
    return ", ".join(f"{p.distribution} {'/'.join(p.versions)}" for p in supported())


def find(os_release_id: str, version_id: str) -> Platform | None:
    """The table's entry for an /etc/os-release ID and VERSION_ID, or None when it is not supported."""
    for platform in supported():
        if platform.os_release_id == os_release_id.strip().lower() and platform.accepts(version_id.strip()):
            return platform
    return None
