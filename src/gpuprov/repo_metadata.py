"""What a repository offers, read from its own metadata: apt `Packages`, dnf `repodata`, a PEP 503 page.

`gpuprov lock resolve` reads NVIDIA's repository for each OS (or the mirror the inventory names) and the
PyTorch wheel index, and keeps only the releases they really carry. The parsers take the text as the
servers publish it (tests/recorded/repo-metadata/ holds real excerpts, with their sources):

- apt: a `Packages` file, deb822 stanzas (`Package:`, `Version:`, `Architecture:`; Debian Policy 5.3/5.6);
- dnf: `repodata/repomd.xml` names the primary file (`<data type="primary"><location href=...>`), whose
  `<package>` elements carry `<name>`, `<arch>` and `<version ver= rel=>` (the createrepo format);
- PyTorch: a PEP 503 page of `<a>` links to wheels, `torch-<version>+<tag>-<python>-<abi>-<platform>.whl`.

The package names are the ones gpuprov's roles install (roles/*/vars), so "offered" means "the role can
install it from there".
"""

from __future__ import annotations

import html.parser
import re
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

APT, DEBIAN, RPM = "apt", "debian", "rpm"  # Ubuntu's apt scheme, Debian's (debian12), dnf
_COMMON_NS = "{http://linux.duke.edu/metadata/common}"
_REPO_NS = "{http://linux.duke.edu/metadata/repo}"


class MetadataError(ValueError):
    """Metadata that is not what its format says (the message says what is wrong)."""


# -- the formats -------------------------------------------------------------------------------------------


def apt_packages(text: str) -> dict[str, set[str]]:
    """Package name -> its versions, from a `Packages` file (amd64 and all only: the hosts are x86_64)."""
    found: dict[str, set[str]] = {}
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z0-9-]+):[ \t]*(.*)$", stanza, flags=re.MULTILINE))
        name, version = fields.get("Package"), fields.get("Version")
        if name and version and fields.get("Architecture", "amd64") in ("amd64", "all"):
            found.setdefault(name.strip(), set()).add(version.strip())
    if text.strip() and not found:
        raise MetadataError("no package stanza (Package: and Version:) in it; is this a Packages file?")
    return found


def primary_location(repomd_xml: str) -> str:
    """The path of the primary file that repomd.xml names (relative to the repository's root)."""
    root = _xml(repomd_xml, "repomd.xml")
    for data in root.iter(f"{_REPO_NS}data"):
        location = data.find(f"{_REPO_NS}location")
        if data.get("type") == "primary" and location is not None and location.get("href"):
            return str(location.get("href"))
    raise MetadataError('repomd.xml names no primary file (<data type="primary">)')


def rpm_packages(primary_xml: str) -> dict[str, set[str]]:
    """Package name -> its `version-release`s, from primary.xml (x86_64 and noarch only)."""
    root = _xml(primary_xml, "primary.xml")
    found: dict[str, set[str]] = {}
    for package in root.iter(f"{_COMMON_NS}package"):
        name = package.findtext(f"{_COMMON_NS}name")
        arch = package.findtext(f"{_COMMON_NS}arch")
        version = package.find(f"{_COMMON_NS}version")
        if not name or version is None or arch not in ("x86_64", "noarch"):
            continue
        found.setdefault(name, set()).add(f"{version.get('ver')}-{version.get('rel')}")
    return found


def _xml(text: str, what: str) -> ET.Element:
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise MetadataError(f"{what} is not XML ({exc})") from None


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            path = urllib.parse.urlsplit(href).path
            self.names.append(urllib.parse.unquote(path.rsplit("/", 1)[-1]))


_WHEEL = re.compile(r"torch-(\d+\.\d+\.\d+)(?:\+([a-z0-9]+))?-(cp\d+)-[^-]+-([^-]+)\.whl")


def torch_wheels(page: str) -> set[tuple[str, str, str]]:
    """(version, tag, python) of each Linux x86_64 torch wheel a PEP 503 page links to.

    A wheel without a local tag (`torch-2.5.1-cp311-...`) has tag "": on PyTorch's per-tag indexes that is
    the aarch64 build, which the hosts (x86_64) do not take anyway.
    """
    links = _Links()
    links.feed(page)
    wheels = set()
    for name in links.names:
        match = _WHEEL.fullmatch(name)
        if match and ("x86_64" in match[4]) and match[4].startswith(("linux", "manylinux")):
            wheels.add((match[1], match[2] or "", match[3]))
    return wheels


# -- what the packages mean for a lock ---------------------------------------------------------------------


@dataclass
class Offer:
    """The lock's releases one repository carries, in the lock's own spelling."""

    drivers: dict[str, set[str]] = field(default_factory=dict)  # version -> flavors ("open", "proprietary")
    cuda: set[str] = field(default_factory=set)  # "12.4.1"
    cudnn: set[tuple[str, str]] = field(default_factory=set)  # ("9.5.1.17", "12"): v9 per CUDA major
    nccl: set[tuple[str, str]] = field(default_factory=set)  # ("2.21.5", "12.4"): the +cudaX.Y build

    def has_cudnn(self, version: str, cuda: str) -> bool:
        """cuDNN 9 is packaged per CUDA major (libcudnn9-cuda-12), cuDNN 8 per CUDA minor (+cuda12.2)."""
        major, minor = cuda.split(".")[0], ".".join(cuda.split(".")[:2])
        return (version, major) in self.cudnn or (version, minor) in self.cudnn


def _upstream(version: str) -> str:
    """ "550.127.08-0ubuntu1" -> "550.127.08"; an epoch ("1:") goes too."""
    return version.split(":", 1)[-1].split("-", 1)[0]


# Driver packages, the kernel modules' package of each flavor that the role installs: NVIDIA's ubuntu
# repositories name the branch until R580 (nvidia-kernel-source-550-open) and not from R590
# (nvidia-kernel-source-open; Driver Installation Guide r590, 4.1.1; roles/nvidia_driver/vars/Debian.yml);
# its debian12 repository names neither (nvidia-kernel-open-dkms: vars/Debian-12.yml); EL names the flavor
# in the kmod package (vars/RedHat.yml).
_APT_DRIVER = re.compile(r"nvidia-kernel-source(?:-(\d{3}))?(-open)?")
_NAMED_DRIVER = {
    DEBIAN: {"nvidia-kernel-open-dkms": "open", "nvidia-kernel-dkms": "proprietary"},
    RPM: {"kmod-nvidia-open-dkms": "open", "kmod-nvidia-latest-dkms": "proprietary"},
}
_CUDA = re.compile(r"cuda-toolkit-(\d+)-(\d+)")
_CUDNN9 = re.compile(r"libcudnn(\d+)-cuda-(\d+)")
_NCCL = re.compile(r"(\d+\.\d+\.\d+)-\d+[+.]cuda(\d+\.\d+)")
_CUDNN8 = re.compile(r"(\d+(?:\.\d+){3})-\d+[+.]cuda(\d+\.\d+)")


def offer(packages: Mapping[str, Iterable[str]], kind: str) -> Offer:
    """What a repository's packages (apt_packages / rpm_packages) offer a lock; kind: APT (NVIDIA's ubuntu
    repositories), DEBIAN (its debian12 one) or RPM. cuDNN and NCCL count where the runtime and the
    development package are both there at the version, as the cudnn and nccl roles install both."""
    found = Offer()
    runtime: dict[str, set[tuple[str, str]]] = {"cudnn": set(), "nccl": set()}
    development: dict[str, set[tuple[str, str]]] = {"cudnn": set(), "nccl": set()}
    for name, versions in packages.items():
        for version in versions:
            _classify(found, name, version, kind, runtime, development)
    found.cudnn = runtime["cudnn"] & development["cudnn"]
    found.nccl = runtime["nccl"] & development["nccl"]
    return found


_DEV = re.compile(r"-(?:dev|devel)(?=-|$)")  # libnccl-dev, libcudnn9-dev-cuda-12, libnccl-devel, ...


def _classify(
    found: Offer,
    name: str,
    version: str,
    kind: str,
    runtime: dict[str, set[tuple[str, str]]],
    development: dict[str, set[tuple[str, str]]],
) -> None:
    upstream = _upstream(version)
    flavor = _driver_flavor(name, upstream, kind)
    if flavor:
        found.drivers.setdefault(upstream, set()).add(flavor)
        return
    if (match := _CUDA.fullmatch(name)) and upstream.split(".")[:2] == [match[1], match[2]]:
        found.cuda.add(upstream)
        return
    into = development if _DEV.search(name) else runtime
    base = _DEV.sub("", name, count=1)
    if (match := _CUDNN9.fullmatch(base)) and upstream.split(".")[0] == match[1]:
        into["cudnn"].add((upstream, match[2]))
    elif base == "libcudnn8" and (match := _CUDNN8.fullmatch(version.split(":", 1)[-1])):
        into["cudnn"].add((match[1], match[2]))
    elif base == _nccl_name(kind, into is development) and (match := _NCCL.fullmatch(version)):
        into["nccl"].add((match[1], match[2]))


def _nccl_name(kind: str, development: bool) -> str:
    """apt: libnccl2 and libnccl-dev; dnf: libnccl and libnccl-devel (roles/nccl/vars), "-dev*" taken off."""
    return "libnccl" if development or kind == RPM else "libnccl2"


def _driver_flavor(name: str, upstream: str, kind: str) -> str:
    if kind in _NAMED_DRIVER:
        return _NAMED_DRIVER[kind].get(name, "")
    match = _APT_DRIVER.fullmatch(name)
    if not match:
        return ""
    branch = upstream.split(".")[0]
    named = match[1]
    # the branch in the name until R580, none from R590: anything else is not the role's package
    if (named is None) != (branch.isdigit() and int(branch) >= 590) or (named and named != branch):
        return ""
    return "open" if match[2] else "proprietary"
