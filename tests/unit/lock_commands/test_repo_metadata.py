"""gpuprov.repo_metadata: the formats (apt Packages, repomd/primary, a PEP 503 page) and what their packages
offer a lock, on recorded real text where one was found (tests/recorded/repo-metadata/SOURCES.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuprov import repo_metadata as rm

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "repo-metadata"


def test_the_pytorch_cu124_page_gives_the_linux_x86_64_wheels_only() -> None:
    wheels = rm.torch_wheels((RECORDED / "pytorch-cu124-torch-2.5.1.html").read_text())
    # cp39..cp313 for Linux x86_64; the win_amd64 and the untagged aarch64 wheels are not the hosts'
    assert wheels == {("2.5.1", "cu124", f"cp3{minor}") for minor in (9, 10, 11, 12, 13)}


def test_nccl_builds_from_nvidias_ubuntu2204_versions() -> None:
    """The versions `apt policy libnccl-dev` lists from NVIDIA's ubuntu2204 repository (recorded): each is
    one +cudaX.Y build; NVIDIA publishes libnccl2 beside libnccl-dev at each (the nccl role installs both)."""
    text = (RECORDED / "ubuntu2204-libnccl-dev-apt-policy.txt").read_text()
    versions = re.findall(r"^\s{5}(\S+) \d+$", text, flags=re.MULTILINE)
    offer = rm.offer({"libnccl2": versions, "libnccl-dev": versions}, rm.APT)
    assert offer.nccl == {("2.28.9", "13.0"), ("2.28.9", "12.9"), ("2.28.7", "13.0"), ("2.28.7", "12.9"),
                          ("2.28.3", "13.0")}  # fmt: skip
    assert rm.offer({"libnccl2": versions}, rm.APT).nccl == set()  # without the -dev package: not offered


PACKAGES = """\
Package: cuda-toolkit-12-4
Architecture: amd64
Version: 12.4.1-1
Filename: ./cuda-toolkit-12-4_12.4.1-1_amd64.deb

Package: nvidia-kernel-source-550-open
Architecture: amd64
Version: 550.127.08-0ubuntu1

Package: nvidia-kernel-source-550
Architecture: amd64
Version: 550.127.08-0ubuntu1

Package: nvidia-kernel-source-open
Architecture: amd64
Version: 590.48.01-0ubuntu1

Package: nvidia-kernel-source-580-open
Architecture: arm64
Version: 580.95.05-0ubuntu1

Package: libcudnn9-cuda-12
Architecture: amd64
Version: 9.5.1.17-1

Package: libcudnn9-dev-cuda-12
Architecture: amd64
Version: 9.5.1.17-1

Package: libcudnn9-cuda-13
Architecture: amd64
Version: 9.15.0.58-1
"""


def test_an_ubuntu_packages_file_by_nvidias_two_naming_schemes() -> None:
    offer = rm.offer(rm.apt_packages(PACKAGES), rm.APT)
    assert offer.cuda == {"12.4.1"}
    # R550 names its branch, R590 does not (Driver Installation Guide r590, Table 4); arm64 is not the hosts'
    assert offer.drivers == {"550.127.08": {"open", "proprietary"}, "590.48.01": {"open"}}
    assert offer.has_cudnn("9.5.1.17", "12.4.1")
    assert not offer.has_cudnn(
        "9.15.0.58", "13.0.2"
    )  # no libcudnn9-dev-cuda-13: the role could not install it


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("nvidia-kernel-source-590-open", "590.48.01-1"),  # R590+ has no branch in the name
        ("nvidia-kernel-source-open", "580.95.05-1"),  # before R590 it has
        ("nvidia-kernel-source-570-open", "580.95.05-1"),  # another branch's name
    ],
)
def test_driver_packages_outside_the_scheme_are_not_offers(name: str, version: str) -> None:
    assert rm.offer({name: [version]}, rm.APT).drivers == {}


def test_debian12_and_el_name_the_flavor_not_the_branch() -> None:
    debian = rm.offer(
        {"nvidia-kernel-open-dkms": ["570.124.06-1"], "nvidia-kernel-dkms": ["550.127.08-1"]}, rm.DEBIAN
    )
    assert debian.drivers == {"570.124.06": {"open"}, "550.127.08": {"proprietary"}}
    el = rm.offer(
        {"kmod-nvidia-open-dkms": ["3:580.95.05-1.el9"], "kmod-nvidia-latest-dkms": ["580.95.05-1.el9"]},
        rm.RPM,
    )
    assert el.drivers == {"580.95.05": {"open", "proprietary"}}


REPOMD = """<?xml version="1.0" encoding="UTF-8"?>
<repomd xmlns="http://linux.duke.edu/metadata/repo" xmlns:rpm="http://linux.duke.edu/metadata/rpm">
  <revision>1732000000</revision>
  <data type="primary_db"><location href="repodata/aa-primary.sqlite.bz2"/></data>
  <data type="primary"><location href="repodata/bb-primary.xml.gz"/></data>
</repomd>
"""

ROWS = [  # name, arch, ver, rel: NVIDIA's rpm versions, e.g. libnccl-2.21.5-1+cuda12.4.x86_64
    ("libnccl", "x86_64", "2.21.5", "1+cuda12.4"),
    ("libnccl-devel", "x86_64", "2.21.5", "1+cuda12.4"),
    ("libcudnn8", "x86_64", "8.9.7.29", "1.cuda12.2"),
    ("libcudnn8-devel", "x86_64", "8.9.7.29", "1.cuda12.2"),
    ("cuda-toolkit-12-4", "x86_64", "12.4.1", "1"),
    ("cuda-toolkit-12-4", "aarch64", "12.4.0", "1"),
]
PRIMARY = "\n".join(
    [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm">',
        *(
            f'<package type="rpm"><name>{name}</name><arch>{arch}</arch>'
            f'<version epoch="0" ver="{ver}" rel="{rel}"/></package>'
            for name, arch, ver, rel in ROWS
        ),
        "</metadata>",
    ]
)


def test_repodata_primary_location_and_packages() -> None:
    assert rm.primary_location(REPOMD) == "repodata/bb-primary.xml.gz"  # not primary_db
    offer = rm.offer(rm.rpm_packages(PRIMARY), rm.RPM)
    assert offer.nccl == {("2.21.5", "12.4")}
    assert offer.cuda == {"12.4.1"}  # the aarch64 row is not the hosts'
    assert offer.has_cudnn("8.9.7.29", "12.2.2") and not offer.has_cudnn("8.9.7.29", "12.4.1")


@pytest.mark.parametrize(
    ("call", "text", "expected"),
    [
        (rm.apt_packages, "<html>Not Found</html>", "no package stanza"),
        (
            rm.primary_location,
            "<repomd xmlns='http://linux.duke.edu/metadata/repo'/>",
            "names no primary file",
        ),
        (rm.rpm_packages, "<html", "primary.xml is not XML"),
    ],
)
def test_text_that_is_not_the_format_is_one_error(call: object, text: str, expected: str) -> None:
    with pytest.raises(rm.MetadataError, match=expected):
        call(text)  # type: ignore[operator]
