"""The dnf module metadata (modules.yaml) of the stand-in rpm repositories, made by NVIDIA's rules.

NVIDIA's rhel8/rhel9 repositories carry one dnf module, `nvidia-driver`, whose streams hold the driver
packages apart by branch; dnf hides every driver package that is not in an active stream. The sandbox's
rpm repositories get the same metadata, so the roles meet real `dnf module` behaviour: the default stream
`latest-dkms` hides older branches, a stream that NVIDIA does not publish does not exist, and `dnf module
enable` refuses to move from another enabled stream.

The rules are those of NVIDIA's generator, read (not copied) from genmodules.py in
github.com/NVIDIA/cuda-repo-management (commit 2944b7a42b479a10390340d14dd3857c155a813a), which
repo-rpm.sh runs over the repository's rpms and adds with `modifyrepo_c modules.yaml repodata/`:

- per driver branch <b> (the major version of the nvidia-driver rpms): streams `<b>` (precompiled kmods),
  `<b>-dkms` (kmod-nvidia-latest-dkms) and, for b > 510, `<b>-open` (kmod-nvidia-open-dkms);
- `latest` and `latest-dkms` at the newest branch, and `open-dkms` when that branch is above 510;
- a stream's artifacts: every version of the branch's packages in BRANCH_PACKAGES and OPTIONAL_PACKAGES,
  the newest dnf-plugin-nvidia, and only the newest version of the branch's DKMS kernel module package;
- profiles `default`, `src` (open and precompiled streams), `fm` (x86_64) and `ks`;
- a modulemd-defaults document: default stream `latest-dkms`, default profile `default` for each stream.

The expected result for the sandbox's branches is recorded in tests/recorded/el-module-streams.yaml.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from gpuprov.sandbox.standins import Package

MODULE = "nvidia-driver"
DEFAULT_STREAM = "latest-dkms"
# The fixed module version of every stream: NVIDIA's generator stamps the build time; a fixed one keeps
# the mirror's content a function of its inputs.
MODULE_VERSION = "20240101000000"
ARCH = "x86_64"

# genmodules.py's BRANCH_PKGS, OPTIONAL_PKGS and LATEST_PKGS.
BRANCH_PACKAGES = (
    "nvidia-driver",
    "nvidia-driver-libs",
    "nvidia-driver-devel",
    "nvidia-driver-NVML",
    "nvidia-driver-NvFBCOpenGL",
    "nvidia-driver-cuda",
    "nvidia-driver-cuda-libs",
    "nvidia-persistenced",
    "nvidia-modprobe",
    "nvidia-settings",
    "nvidia-libXNVCtrl",
    "nvidia-libXNVCtrl-devel",
    "nvidia-xconfig",
    "nvidia-kmod-common",
    "cuda-drivers",
)
OPTIONAL_PACKAGES = ("nvidia-kmod-headers", "nvidia-kmod-source", "nvidia-fabric-manager")
LATEST_PACKAGES = ("dnf-plugin-nvidia",)
OPEN_KMOD = "kmod-nvidia-open-dkms"
DKMS_KMOD = "kmod-nvidia-latest-dkms"
FIRST_OPEN_BRANCH = 511  # "open" streams exist for branches above 510
FIRST_FM_WITHOUT_BRANCH_NAME = 460  # below it the fm profile names nvidia-fabricmanager-<branch>

# genmodules.py writes these lines as a folded (">-") YAML block, which reads as this text.
DESCRIPTION = (
    "This package provides the most recent NVIDIA display driver which allows for "
    "hardware accelerated rendering with recent NVIDIA chipsets.\n"
    "For the full product support list, please consult the release notes for "
    "driver version {version}."
)


@dataclass(frozen=True)
class Stream:
    name: str  # "550-open"
    branch: str  # "550"
    version: str  # the newest driver version of the branch: "550.127.08"
    rpms: tuple[str, ...]  # artifacts, as name-epoch:version-release.arch
    profiles: dict[str, tuple[str, ...]]

    @property
    def is_open(self) -> bool:
        return "open" in self.name

    @property
    def is_dkms(self) -> bool:
        return "dkms" in self.name


def streams(packages: Sequence[Package]) -> list[Stream]:
    """The nvidia-driver streams NVIDIA's generator makes for a repository holding these rpms."""
    newest: dict[str, str] = {}
    for p in packages:
        if p.name == BRANCH_PACKAGES[0]:
            branch = p.version.split(".")[0]
            if branch not in newest or _key(p.version) > _key(newest[branch]):
                newest[branch] = p.version
    branches = sorted(newest, key=lambda b: _key(newest[b]), reverse=True)
    if not branches:
        return []
    names: list[tuple[str, str]] = []
    latest = branches[0]
    names += [("latest", latest), ("latest-dkms", latest)]
    if int(latest) >= FIRST_OPEN_BRANCH:
        names.append(("open-dkms", latest))
    for b in branches:
        names += [(b, b), (f"{b}-dkms", b)]
        if int(b) >= FIRST_OPEN_BRANCH:
            names.append((f"{b}-open", b))
    return [_stream(name, b, newest[b], packages) for name, b in names]


def _stream(name: str, branch: str, version: str, packages: Sequence[Package]) -> Stream:
    def of_branch(names: Sequence[str]) -> list[Package]:
        found = [p for p in packages if p.name in names and p.version.split(".")[0] == branch]
        return sorted(found, key=lambda p: (names.index(p.name), _key(p.version)))

    is_open, is_dkms = "open" in name, "dkms" in name
    branch_rpms = of_branch(BRANCH_PACKAGES)
    optional = [
        o
        for o in of_branch(OPTIONAL_PACKAGES)
        if not (o.name == "nvidia-kmod-headers" and is_open)
        and not (o.name == "nvidia-kmod-source" and not is_open)
    ]
    latest_tools = [max(ps, key=lambda p: _key(p.version)) for ps in _by_name(packages, LATEST_PACKAGES)]
    kmod_name = OPEN_KMOD if is_open else DKMS_KMOD if is_dkms else ""
    # Only the kernel module package at the branch's newest version (precompiled kmods: none here).
    kmods = [p for p in packages if p.name == kmod_name and p.version == version]
    rpms = tuple(_nevra(p) for p in (*branch_rpms, *optional, *latest_tools, *kmods))

    installed = sorted({p.name for p in branch_rpms})
    kmod = [kmod_name] if kmod_name else []
    profiles: dict[str, tuple[str, ...]] = {"default": (*installed, *kmod)}
    if is_open:
        profiles["src"] = ("nvidia-kmod-source",)
    elif not is_dkms:
        profiles["src"] = ("nvidia-kmod-headers",)
    if int(branch) < FIRST_FM_WITHOUT_BRANCH_NAME and "latest" not in name:
        fabric = (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}")
    else:
        fabric = ("nvidia-fabric-manager", f"libnvidia-nscq-{branch}")
    profiles["fm"] = (*installed, *kmod, *fabric)
    profiles["ks"] = (*(n for n in installed if "cuda-drivers" not in n), *kmod)
    return Stream(name, branch, version, rpms, profiles)


def _by_name(packages: Sequence[Package], names: Sequence[str]) -> list[list[Package]]:
    groups = [[p for p in packages if p.name == n] for n in names]
    return [g for g in groups if g]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _nevra(p: Package) -> str:
    return f"{p.name}-{p.epoch}:{p.version}-{p.release}.{ARCH}"


def modules_yaml(packages: Sequence[Package], distro: str) -> str:
    """modules.yaml for `modifyrepo_c`: one modulemd document per stream, then the module's defaults."""
    found = streams(packages)
    documents: list[dict[str, object]] = [_modulemd(s, distro) for s in found]
    if found:
        documents.append(
            {
                "document": "modulemd-defaults",
                "version": 1,
                "data": {
                    "module": MODULE,
                    "stream": DEFAULT_STREAM,
                    "profiles": {s.name: ["default"] for s in found},
                },
            }
        )
    text: str = yaml.safe_dump_all(documents, explicit_start=True, explicit_end=True, sort_keys=False)
    return text


def _modulemd(stream: Stream, distro: str) -> dict[str, object]:
    context = hashlib.md5((MODULE + stream.name + MODULE_VERSION + distro).encode()).hexdigest()[:10]
    return {
        "document": "modulemd",
        "version": 2,
        "data": {
            "name": MODULE,
            "stream": stream.name,
            "version": int(MODULE_VERSION),
            "context": context,
            "arch": ARCH,
            "summary": f"Nvidia driver for {stream.name} branch",
            "description": DESCRIPTION.format(version=stream.version),
            "license": {"module": ["MIT"]},
            "artifacts": {"rpms": list(stream.rpms)},
            "profiles": {
                name: {"description": _profile_description(name, stream), "rpms": list(rpms)}
                for name, rpms in stream.profiles.items()
            },
        },
    }


def _profile_description(profile: str, stream: Stream) -> str:
    if profile == "src":
        return (
            "Source files for compiling open kernel modules"
            if stream.is_open
            else "Source headers for compilation"
        )
    return {
        "default": "Default installation",
        "fm": "FabricManager installation",
        "ks": "Installation via kickstart",
    }[profile]
