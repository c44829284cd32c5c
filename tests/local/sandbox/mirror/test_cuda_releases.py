"""What each repository carries: the CUDA releases of NVIDIA's repository of that name, and the sandbox
lock."""

from __future__ import annotations

import re

import pytest

from gpuprov import lock
from gpuprov.sandbox.inventory import SANDBOX_LOCK
from gpuprov.sandbox.mirror import APT_REPOS, RPM_REPOS, MirrorContent
from gpuprov.sandbox.standins import CATALOGUE
from tests.local.sandbox.mirror.helpers import (
    needs_build_tools,
    paragraphs,
    repo,
    run,
)

pytestmark = needs_build_tools


def _repository_versions(content: MirrorContent, name: str) -> dict[str, set[str]]:
    """Package name -> versions (apt: Version; rpm: version-release) in one repository."""
    versions: dict[str, set[str]] = {}
    if name in APT_REPOS:
        for p in paragraphs(repo(content, name) / "Packages"):
            versions.setdefault(p["Package"], set()).add(p["Version"])
        return versions
    rpm_files = sorted(repo(content, name).glob("*.rpm"))
    query = run("rpm", "-qp", "--qf", r"%{NAME} %{VERSION}-%{RELEASE}\n", *rpm_files).stdout
    for line in query.splitlines():
        package, version = line.split()
        versions.setdefault(package, set()).add(version)
    return versions


@pytest.mark.integration
@pytest.mark.parametrize("name", [*APT_REPOS, *RPM_REPOS])
def test_each_repository_carries_the_cuda_releases_the_table_lists_for_it(
    built: MirrorContent, name: str
) -> None:
    """os_repositories of the compatibility table (read here directly, not through the mirror) decides, for
    the releases the catalogue has, which toolkits each repository holds and which CUDA minors its cuDNN 8
    and NCCL builds are for."""
    listed = set(lock.load_table()["os_repositories"][name]["cuda"])
    expected = {c.version for c in CATALOGUE.cuda if c.version in listed}
    versions = _repository_versions(built, name)
    toolkits = {
        v.rsplit("-", 1)[0]
        for package, vs in versions.items()
        if re.fullmatch(r"cuda-toolkit-\d+-\d+", package)
        for v in vs
    }
    assert toolkits == expected
    minors = {".".join(v.split(".")[:2]) for v in expected}
    builds = {
        m
        for package in ("libnccl2", "libnccl", "libcudnn8")
        for v in versions.get(package, set())
        for m in re.findall(r"cuda(\d+\.\d+)$", v)
    }
    assert builds and builds <= minors
    assert {n.cuda for n in CATALOGUE.nccl if n.cuda in minors} <= builds


@pytest.mark.integration
def test_debian12_has_no_cuda_12_2_builds(built: MirrorContent) -> None:
    """NVIDIA's debian12 repository starts at CUDA 12.3 (see os_repositories.debian12)."""
    versions = _repository_versions(built, "debian12")
    assert "cuda-toolkit-12-2" not in versions
    assert "libcudnn8" not in versions
    assert not any("+cuda12.2" in v for v in versions["libnccl2"] | versions["libnccl-dev"])
    assert "cuda-toolkit-12-2" in _repository_versions(built, "ubuntu2204")  # which does carry it


@pytest.mark.integration
@pytest.mark.parametrize("name", ["debian12", "ubuntu2204", "rhel9"])
def test_the_sandbox_nodes_repositories_hold_the_sandbox_lock(built: MirrorContent, name: str) -> None:
    """The repositories of the sandbox's debian12, ubuntu22.04 and rocky9 nodes."""
    lock_ = SANDBOX_LOCK
    versions = _repository_versions(built, name)
    toolkit = "cuda-toolkit-" + "-".join(lock_["cuda_version"].split(".")[:2])
    assert f"{lock_['cuda_version']}-1" in versions[toolkit]
    assert f"{lock_['cudnn_version']}-1" in versions["libcudnn9-cuda-12"]
    nccl = "libnccl2" if name in APT_REPOS else "libnccl"
    assert f"{lock_['nccl_version']}-1+cuda12.4" in versions[nccl]
    # The ubuntu repositories name the driver by its branch up to R580 (drivers.py).
    driver = {
        "debian12": "nvidia-driver-cuda",
        "ubuntu2204": f"nvidia-headless-{lock_['driver_branch']}-open",
    }.get(name, "nvidia-driver")
    assert f"{lock_['driver_version']}-1" in versions[driver]


@pytest.mark.integration
def test_ubuntu2404_starts_after_the_sandbox_lock_cuda(built: MirrorContent) -> None:
    """NVIDIA's ubuntu2404 repository has no CUDA 12.2/12.4; no sandbox node uses it."""
    versions = _repository_versions(built, "ubuntu2404")
    assert "cuda-toolkit-12-4" not in versions and "cuda-toolkit-12-2" not in versions
    assert versions["cuda-toolkit-12-6"] == {"12.6.3-1"}
