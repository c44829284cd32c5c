"""The repository entries NVIDIA's install guide has a host add: cuda-keyring (apt), cuda-<os>.repo (dnf).

cuda-keyring 1.1-1 (Architecture all, one per repository directory, e.g.
developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb) installs, as
`dpkg -L cuda-keyring` lists it (github.com/autowarefoundation/autoware_core_universe_prototype/pull/265,
an ubuntu2004 host):

    /etc/apt/preferences.d/cuda-repository-pin-600
    /etc/apt/sources.list.d/cuda-ubuntu2004-x86_64.list
    /usr/share/doc/cuda-keyring/changelog.Debian.gz
    /usr/share/keyrings/cuda-archive-keyring.gpg

The list file is one line, `deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg]
https://developer.download.nvidia.com/compute/cuda/repos/<os>/x86_64/ /` (the entry apt names in
"Conflicting values set for option Signed-By regarding source
https://developer.download.nvidia.com/compute/cuda/repos/ubuntu1804/x86_64/ /:
/usr/share/keyrings/cuda-archive-keyring.gpg != ", github.com/NVIDIA/cuda-repo-management/issues/4). The
pin file is the repository's cuda-<os>.pin (its content as `cat cuda-ubuntu2204.pin` prints it in the
cuda-keyring build instructions). The keyring is a binary OpenPGP keyring (.gpg) with the repository's key;
here the sandbox mirror's key, which stands in for NVIDIA's 3bf863cc. The pin file is shipped for the
ubuntu* repositories only: the listing above is an Ubuntu one, the debian12 package's was not checked.
The changelog is left out (its text is not recorded); the STANDIN note takes its directory.

On EL, NVIDIA's guide runs `dnf config-manager --add-repo <repository>/cuda-rhel9.repo`; that file
(tests/recorded/nvidia-repository/cuda-rhel9.repo, with its sources) is one section named after the directory,
`[cuda-rhel9-x86_64]`, its name the same, baseurl the repository, enabled=1, gpgcheck=1 and gpgkey the
repository's key file (D42D0685.pub) by URL.

The stand-ins name the sandbox mirror where NVIDIA's name developer.download.nvidia.com (SANDBOX_REPOS_URL),
as the mirror's copy of Debian's archive does: a host that installs them meets the same URL gpuprov's role
is pointed at, as a host of NVIDIA's repository would.
"""

from __future__ import annotations

from gpuprov.sandbox.standins.model import Entry, File, Format, Package
from gpuprov.sandbox.standins.parts import package

NVIDIA_REPOS_URL = "https://developer.download.nvidia.com/compute/cuda/repos"
# The mirror's CUDA repositories as the nodes reach them: the mirror container's network alias "mirror"
# (sandbox/cluster.py), which outlives a re-created mirror's new address. The sandbox inventory points the
# nvidia_repository role here too.
SANDBOX_REPOS_URL = "http://mirror/cuda/repos"
KEYRING_PATH = "/usr/share/keyrings/cuda-archive-keyring.gpg"
VERSION, RELEASE = "1.1", "1"

PIN = """\
Package: nsight-compute
Pin: origin *ubuntu.com*
Pin-Priority: -1

Package: nsight-systems
Pin: origin *ubuntu.com*
Pin-Priority: -1

Package: *
Pin: release l=NVIDIA CUDA
Pin-Priority: 600
"""


def sources_file(repo: str, arch_dir: str = "x86_64") -> str:
    """ "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"."""
    return f"/etc/apt/sources.list.d/cuda-{repo}-{arch_dir}.list"


def sources_line(repo: str, base_url: str = SANDBOX_REPOS_URL, arch_dir: str = "x86_64") -> str:
    return f"deb [signed-by={KEYRING_PATH}] {base_url}/{repo}/{arch_dir}/ /\n"


def repo_file_name(repo: str) -> str:
    """ "cuda-rhel9.repo": the file in each rpm repository directory for `dnf config-manager --add-repo`."""
    return f"cuda-{repo}.repo"


def repo_file(repo: str, key_file: str, base_url: str = SANDBOX_REPOS_URL, arch_dir: str = "x86_64") -> str:
    """cuda-<repo>.repo as NVIDIA serves it, naming the key file KEY_FILE (NVIDIA's: D42D0685.pub)."""
    url = f"{base_url}/{repo}/{arch_dir}"
    section = f"cuda-{repo}-{arch_dir}"
    return f"[{section}]\nname={section}\nbaseurl={url}\nenabled=1\ngpgcheck=1\ngpgkey={url}/{key_file}\n"


def cuda_keyring(repo: str, keyring: bytes) -> Package:
    """cuda-keyring 1.1-1 of NVIDIA's repository directory `repo` (debian12, ubuntu2204 ...), its entry naming
    the sandbox mirror."""
    entries: list[Entry] = [
        File(sources_file(repo), sources_line(repo).encode()),
        File(KEYRING_PATH, keyring),
    ]
    if repo.startswith("ubuntu"):
        entries.append(File("/etc/apt/preferences.d/cuda-repository-pin-600", PIN.encode()))
    summary = "GPG keyring for the CUDA repository"
    return package(Format.DEB, VERSION, RELEASE, "cuda-keyring", summary, entries, arch_independent=True)
