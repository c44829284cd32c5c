"""A stand-in for Rocky 9's AppStream `python3.11` package, for the sandbox's rocky-like nodes.

python_env gives an EL host the newest AppStream Python the locked PyTorch has wheels for, installed as its
own package beside the OS's python3 (3.9 on EL 9). The rocky-like node is Debian 12's rootfs, whose own
interpreter is Python 3.11 (and Rocky's binaries would not run on it), so the stand-in is one rpm with
Rocky's name, version and path that carries Debian 12's real `/usr/bin/python3.11` (from the
`python3.11-minimal` .deb, unchanged): installing it puts the rpm in the node's rpm database and the file
where Rocky's package puts it; the interpreter's standard library is the node's own (Debian's).

Recorded facts:
- RHEL 9 "Installing and using dynamic programming languages", Table 1.1: Python 3.11 is the package
  `python3.11` (command `python3.11`, in AppStream since RHEL 9.2); Rocky rebuilds it under the same name.
- Its 9.4 build: `python3.11-3.11.7-1.el9_4.7.x86_64` (with python3.11-libs of the same version,
  python3.11-pip 22.3.1-5.el9, python3.11-setuptools 65.5.1-2.el9_4.1), as installed from RHEL 9's
  AppStream EUS repository in a published rpm-ostree log (search index, id 66808483553).
- The interpreter is `/usr/bin/python3.11` (the table's command; python_env's default
  `python_env_venv_python`).
- Rocky 9's /etc/yum.repos.d/rocky.repo, section [appstream]: gpgcheck=1, enabled=1,
  gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9 and no repo_gpgcheck (rocky-repos' file as copied into
  public repositories, search index).
What differs from Rocky: the interpreter is Debian's 3.11.2, not 3.11.7; the rpm carries only the
interpreter (no python3.11-libs, pip or setuptools rpms: the node's Debian files provide them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuprov.sandbox.rocky_podman import REPO_DIR, debian_files
from gpuprov.sandbox.standins import Format, Package

NAME, VERSION, RELEASE = "python3.11", "3.11.7", "1.el9_4.7"
INTERPRETER = "/usr/bin/python3.11"
DEBIAN_PACKAGE = "python3.11-minimal"  # Debian 12's package of /usr/bin/python3.11


def python_package(debs: Sequence[Path]) -> Package:
    """The stand-in python3.11 rpm from DEBIAN_PACKAGE's .deb among `debs`: its interpreter only."""
    entries = [entry for entry in debian_files(debs, (DEBIAN_PACKAGE,)) if entry.path == INTERPRETER]
    if not entries:
        raise ValueError(f"the Debian package {DEBIAN_PACKAGE} has no {INTERPRETER}")
    return Package(
        format=Format.RPM,
        name=NAME,
        version=VERSION,
        release=RELEASE,
        summary="Rocky 9.4's python3.11 name and version carrying Debian 12's /usr/bin/python3.11",
        entries=tuple(entries),
    )


# On each rocky9 node: the mirror's AppStream stand-in (rocky_podman.REPO_DIR) as the node's AppStream
# repository, configured as Rocky 9's own /etc/yum.repos.d/rocky.repo configures [appstream]: packages checked
# against gpgkey (gpgcheck=1; dnf imports the key on first use, as it imports RPM-GPG-KEY-Rocky-9 on a real
# host), metadata not signed (no repo_gpgcheck); the sandbox key and the mirror's URL in place of Rocky's.
# The file and section name are those ansible.builtin.yum_repository writes for `name: appstream`, so a
# scenario that adds it again (molecule/container_runtime) replaces this file instead of listing the
# repository twice.
NODE_OSES = ("rocky9",)
NODE_REPO_FILE = "etc/yum.repos.d/appstream.repo"
NODE_KEY_FILE = "etc/pki/rpm-gpg/RPM-GPG-KEY-gpuprov-sandbox"


def node_repo(base_url: str = "http://mirror") -> str:
    return (
        "# Written by `gpuprov sandbox up`: the sandbox mirror's stand-in for Rocky Linux 9's AppStream.\n"
        "[appstream]\n"
        "name=Rocky Linux 9 - AppStream (gpuprov sandbox stand-in)\n"
        f"baseurl={base_url}/{REPO_DIR}/\n"
        "enabled=1\n"
        "gpgcheck=1\n"
        f"gpgkey=file:///{NODE_KEY_FILE}\n"
    )
