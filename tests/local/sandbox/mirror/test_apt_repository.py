"""The mirror's apt repositories: signed Release files, NVIDIA's package names and versions, what apt installs
from them, and what the packages carry (toolkit, config and keyring packages, headers, driver libraries)."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
from pathlib import Path

import pytest

from gpuprov.sandbox import mirror, standins
from gpuprov.sandbox.mirror import APT_REPOS, MirrorContent
from gpuprov.sandbox.standins import CATALOGUE
from tests.local.sandbox.mirror.helpers import (
    extract,
    needs_build_tools,
    paragraphs,
    repo,
    run,
    smi,
)

pytestmark = needs_build_tools


@pytest.mark.integration
@pytest.mark.parametrize("name", APT_REPOS)
def test_release_signatures_verify_with_the_published_key(
    built: MirrorContent, keyring: Path, name: str
) -> None:
    d = repo(built, name)
    assert run("gpgv", "--keyring", keyring, d / "InRelease").returncode == 0
    assert run("gpgv", "--keyring", keyring, d / "Release.gpg", d / "Release").returncode == 0
    release = (d / "Release").read_text()
    for field in (
        "Origin: NVIDIA",
        "Label: NVIDIA CUDA",
        f"Suite: {name}",
        f"Codename: {name}",
        "Architectures: amd64",
        "Description: gpuprov sandbox stand-in",
    ):
        assert field in release


DEBIAN_DRIVER_NAMES = (
    "nvidia-driver-cuda",
    "nvidia-kernel-dkms",
    "nvidia-kernel-open-dkms",
    "nvidia-smi",
    "libcuda1",
    "libnvidia-ml1",
    "nvidia-persistenced",
)


@pytest.mark.integration
def test_packages_list_nvidia_names_at_exact_versions(built: MirrorContent) -> None:
    packages = paragraphs(repo(built, "debian12") / "Packages")
    versions: dict[str, set[str]] = {}
    for p in packages:
        versions.setdefault(p["Package"], set()).add(p["Version"])
    assert versions["nvidia-driver-550"] == {"550.127.08-1"}
    # NVIDIA's debian12 repository starts at CUDA 12.3: no 12.2 toolkit, and no cuDNN 8 or NCCL built for it.
    assert versions["libnccl2"] == {"2.21.5-1+cuda12.4", "2.23.4-1+cuda12.6", "2.26.2-1+cuda12.8"}
    assert "libcudnn8" not in versions
    assert versions["libcudnn9-dev-cuda-12"] == {"9.5.1.17-1"}
    assert versions["datacenter-gpu-manager"] == {"1:3.3.9"}
    assert versions["nvidia-container-toolkit"] == {"1.17.3-1", "1.18.0-1"}
    assert {f"cuda-toolkit-12-{m}" for m in (4, 6, 8)} <= versions.keys()
    assert "cuda-toolkit-12-2" not in versions
    # Ubuntu's shape (canonical/nvidia-graphics-drivers, debian/templates/control.in): the headless
    # metapackage names its two parts without a version, they pin the rest at theirs.
    headless = next(p for p in packages if p["Package"] == "nvidia-headless-550-open")
    assert headless["Depends"] == "nvidia-headless-no-dkms-550-open, nvidia-dkms-550-open"
    no_dkms = next(p for p in packages if p["Package"] == "nvidia-headless-no-dkms-550-open")
    assert no_dkms["Depends"] == (
        "nvidia-kernel-common-550 (= 550.127.08-1), nvidia-kernel-source-550-open (= 550.127.08-1), "
        "libnvidia-compute-550 (= 550.127.08-1), nvidia-compute-utils-550 (= 550.127.08-1), "
        "libnvidia-cfg1-550 (= 550.127.08-1)"
    )
    driver = next(p for p in packages if p["Package"] == "nvidia-driver-550")
    assert "xserver-xorg-video-nvidia-550 (= 550.127.08-1)" in driver["Depends"]
    # NVIDIA's debian12 names: one name for every branch, each branch a version of it.
    branches = {f"{d.version}-1" for d in CATALOGUE.drivers}
    for name in DEBIAN_DRIVER_NAMES:
        assert versions[name] == branches, name
    cuda = next(
        p for p in packages if p["Package"] == "nvidia-driver-cuda" and p["Version"] == "550.127.08-1"
    )
    assert cuda["Depends"] == (
        "nvidia-smi (= 550.127.08-1), libcuda1 (= 550.127.08-1), libnvidia-ml1 (= 550.127.08-1), "
        "nvidia-persistenced (= 550.127.08-1), "
        "nvidia-kernel-dkms (= 550.127.08-1) | nvidia-kernel-open-dkms (= 550.127.08-1)"
    )
    # NVIDIA's config packages are Architecture all and carry the runtime's version; the toolkit depends
    # on them unversioned, so apt takes the newest, as with NVIDIA's repository.
    assert versions["cuda-toolkit-config-common"] == {"12.4.127-1", "12.6.77-1", "12.8.90-1"}
    toolkit = next(p for p in packages if p["Package"] == "cuda-toolkit-12-4")
    assert toolkit["Depends"] == "cuda-toolkit-config-common, cuda-toolkit-12-config-common"
    independent = {"cuda-toolkit-config-common", "cuda-toolkit-12-config-common", "cuda-keyring"}
    for p in packages:
        assert p["Maintainer"] == "gpuprov sandbox <sandbox@gpuprov.invalid>"
        assert p["Architecture"] == ("all" if p["Package"] in independent else "amd64"), p["Package"]
        assert "stand-in" in p["Description"]


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt")
def test_apt_installs_from_the_flat_repository_over_http(
    built: MirrorContent, keyring: Path, served: str, tmp_path: Path
) -> None:
    """The sources line the roles write; apt's state stays in tmp_path, so this machine is unchanged."""
    options = _apt_options(tmp_path, keyring, f"{served}/cuda/repos/debian12/x86_64/")
    update = run("apt-get", *options, "update")
    assert update.returncode == 0, update.stderr
    assert "W:" not in update.stderr and "E:" not in update.stderr, update.stderr

    simulated = run("apt-get", *options, "-s", "install", "nvidia-headless-550-open=550.127.08-1")
    assert simulated.returncode == 0, simulated.stderr
    installed = set(re.findall(r"^Inst (\S+) \((\S+) NVIDIA CUDA:debian12", simulated.stdout, re.MULTILINE))
    assert installed == {
        (name, "550.127.08-1")
        for name in (
            "nvidia-headless-550-open",
            "nvidia-headless-no-dkms-550-open",
            "nvidia-dkms-550-open",
            "nvidia-kernel-source-550-open",
            "nvidia-kernel-common-550",
            "libnvidia-compute-550",
            "nvidia-compute-utils-550",
            "libnvidia-cfg1-550",
        )
    }
    nccl = run("apt-cache", *options, "madison", "libnccl2").stdout
    assert "2.21.5-1+cuda12.4" in nccl and "2.23.4-1+cuda12.6" in nccl
    assert "+cuda12.2" not in nccl  # debian12 carries no CUDA 12.2


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt")
def test_apt_installs_the_debian_names_of_the_locked_branch_only_with_the_version_pin(
    built: MirrorContent, keyring: Path, served: str, tmp_path: Path
) -> None:
    """What the role does on debian12: newer branches are newer versions of the same names, and the
    exact-version dependencies resolve to the lock only with the pin the role writes to preferences.d."""
    options = _apt_options(tmp_path, keyring, f"{served}/cuda/repos/debian12/x86_64/")
    assert run("apt-get", *options, "update").returncode == 0
    wanted = ["nvidia-driver-cuda=550.127.08-1", "nvidia-kernel-open-dkms=550.127.08-1"]

    unpinned = run("apt-get", *options, "-s", "install", *wanted)
    assert unpinned.returncode != 0  # apt takes the newest nvidia-smi etc., which the 550 metapackage refuses
    newest = max(CATALOGUE.drivers, key=lambda d: int(d.branch))
    assert f"{newest.version}-1" in unpinned.stdout + unpinned.stderr

    (tmp_path / "preferences.d" / "gpuprov-nvidia-driver").write_text(
        "Package: nvidia-* libnvidia-* libcuda* libnvcuvid* firmware-nvidia-*\n"
        "Pin: version 550.127.08-*\nPin-Priority: 1001\n"
    )
    pinned = run("apt-get", *options, "-s", "install", *wanted)
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    installed = set(re.findall(r"^Inst (\S+) \((\S+) NVIDIA CUDA:debian12", pinned.stdout, re.MULTILINE))
    expected = {"nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1"}
    expected.add("nvidia-persistenced")
    assert installed == {(name, "550.127.08-1") for name in expected}


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt")
def test_apt_installs_the_r590_ubuntu_names_and_they_replace_an_older_branchs(
    built: MirrorContent, keyring: Path, served: str, tmp_path: Path
) -> None:
    """From R590 the Ubuntu names carry no branch (Driver Installation Guide r590, 4.1.1): with the role's
    pin, the branch-less headless set installs at 590.48.01. Over an installed, held R570 set apt's resolver
    alone gives up ("generated breaks"); the role's one transaction, the new names plus the old ones marked
    for removal ("name-"), replaces the whole set."""
    options = _apt_options(tmp_path, keyring, f"{served}/cuda/repos/ubuntu2204/x86_64/")
    assert run("apt-get", *options, "update").returncode == 0
    (tmp_path / "preferences.d" / "gpuprov-nvidia-driver").write_text(
        "Package: nvidia-* libnvidia-* libcuda* libnvcuvid* firmware-nvidia-* xserver-xorg-video-nvidia*\n"
        "Pin: version 590.48.01-*\nPin-Priority: 1001\n"
    )
    fresh = run(
        "apt-get", *options, "-s", "install", "nvidia-headless-open=590.48.01-1", "nvidia-utils=590.48.01-1"
    )
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    installed = set(re.findall(r"^Inst (\S+) \((\S+) NVIDIA CUDA:ubuntu2204", fresh.stdout, re.MULTILINE))
    names = (
        "nvidia-headless-open nvidia-headless-no-dkms-open nvidia-dkms-open nvidia-kernel-source-open "
        "nvidia-kernel-common nvidia-utils libnvidia-compute nvidia-compute-utils libnvidia-cfg1"
    )
    assert installed == {(name, "590.48.01-1") for name in names.split()}

    # An R570 set as dpkg would record it, then the same install: every per-branch package goes.
    # "nvidia-dkms-open" -> "nvidia-dkms-570-open", "nvidia-utils" -> "nvidia-utils-570"
    r570 = {re.sub(r"(-open)?$", r"-570\1", n, count=1) for n in names.split()}
    old = [p for p in standins.deb_packages(CATALOGUE) if p.version == "570.124.06" and p.name in r570]
    assert len(old) == 9
    (tmp_path / "status").write_text(
        "".join(
            f"Package: {p.name}\nStatus: hold ok installed\nVersion: {p.evr}\nArchitecture: amd64\n"
            f"{_control_relations(built, p.name, p.evr)}\n"
            for p in old
        )
    )
    wanted = [f"{name}=590.48.01-1" for name in names.split()]
    held = ["--allow-change-held-packages"]
    alone = run("apt-get", *options, "-s", *held, "install", *wanted)
    assert alone.returncode != 0 and "generated breaks" in alone.stderr, alone.stdout + alone.stderr
    switch = run("apt-get", *options, "-s", *held, "install", *wanted, *(f"{p.name}-" for p in old))
    assert switch.returncode == 0, switch.stdout + switch.stderr
    removed = set(re.findall(r"^Remv (\S+) \[570\.124\.06-1\]", switch.stdout, re.MULTILINE))
    assert removed == {p.name for p in old}, switch.stdout
    installed = set(re.findall(r"^Inst (\S+) \((\S+) NVIDIA CUDA:ubuntu2204", switch.stdout, re.MULTILINE))
    assert installed == {(name, "590.48.01-1") for name in names.split()}


def _control_relations(built: MirrorContent, name: str, evr: str) -> str:
    """The Depends/Provides/Conflicts/Replaces lines of a package as the repository's index lists them."""
    for p in paragraphs(repo(built, "ubuntu2204") / "Packages"):
        if p["Package"] == name and p["Version"] == evr:
            fields = ("Depends", "Provides", "Conflicts", "Replaces")
            return "".join(f"{f}: {p[f]}\n" for f in fields if f in p)
    raise AssertionError(f"{name} {evr} not in the index")


def _apt_options(tmp_path: Path, keyring: Path, url: str) -> list[str]:
    """apt with its state in tmp_path and one source, so this machine's apt is untouched."""
    sources = tmp_path / "sources.list"
    sources.write_text(f"deb [signed-by={keyring}] {url} /\n")
    (tmp_path / "status").touch()
    for d in ("lists/partial", "cache/archives/partial", "preferences.d"):
        (tmp_path / d).mkdir(parents=True)
    return [
        f"-oDir::Etc::SourceList={sources}",
        "-oDir::Etc::SourceParts=/nonexistent",
        f"-oDir::State::Lists={tmp_path / 'lists'}",
        f"-oDir::Cache={tmp_path / 'cache'}",
        f"-oDir::State::status={tmp_path / 'status'}",
        "-oDir::Etc::Preferences=/dev/null",
        f"-oDir::Etc::PreferencesParts={tmp_path / 'preferences.d'}",
        "-oAPT::Sandbox::User=root",
        "-oDebug::NoLocking=1",
    ]


@pytest.mark.integration
def test_cuda_toolkit_installs_beside_others_and_leaves_usr_local_cuda_alone(
    built: MirrorContent, tmp_path: Path
) -> None:
    deb = repo(built, "ubuntu2204") / "cuda-toolkit-12-4_12.4.1-1_amd64.deb"
    listing = run("dpkg-deb", "-c", deb).stdout
    assert "./usr/local/cuda-12.4/bin/nvcc" in listing
    # NVIDIA's layout: the libraries in targets/x86_64-linux/lib, lib64 a link to that directory.
    assert "./usr/local/cuda-12.4/lib64 -> targets/x86_64-linux/lib" in listing
    assert "./usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12 -> libcudart.so.12.4.1" in listing
    assert not re.search(r"\./usr/local/cuda(/| )", listing)
    for p in standins.deb_packages(CATALOGUE) + standins.rpm_packages(CATALOGUE):
        assert not any(
            e.path == "/usr/local/cuda" or e.path.startswith("/usr/local/cuda/") for e in p.entries
        )

    home = extract(deb, tmp_path) / "usr/local/cuda-12.4"
    nvcc = run(home / "bin/nvcc", "--version")
    assert nvcc.returncode == 0
    assert nvcc.stdout == (
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Copyright (c) 2005-2024 NVIDIA Corporation\n"
        "Built on Thu_Mar_28_02:18:24_PDT_2024\n"
        "Cuda compilation tools, release 12.4, V12.4.131\n"
        "Build cuda_12.4.r12.4/compiler.34097967_0\n"
    )
    assert run(home / "bin/nvcc", "-c", "x.cu").returncode != 0  # it says it cannot compile
    assert '"version": "12.4.1"' in (home / "version.json").read_text()
    assert "#define CUDA_VERSION 12040" in (home / "include/cuda.h").read_text()


@pytest.mark.integration
def test_cuda_config_packages_ship_nvidias_linker_entries(built: MirrorContent, tmp_path: Path) -> None:
    d = repo(built, "debian12")
    common = extract(d / "cuda-toolkit-config-common_12.4.127-1_all.deb", tmp_path / "a") / "etc/ld.so.conf.d"
    assert (
        common / "000_cuda.conf"
    ).read_bytes() == b"/usr/local/cuda/targets/x86_64-linux/lib\n"  # 41 bytes
    major = (
        extract(d / "cuda-toolkit-12-config-common_12.4.127-1_all.deb", tmp_path / "b") / "etc/ld.so.conf.d"
    )
    assert (major / "988_cuda-12.conf").read_bytes() == b"/usr/local/cuda-12/targets/x86_64-linux/lib\n"  # 44
    rpms = repo(built, "rhel9")
    assert (rpms / "cuda-toolkit-config-common-12.4.127-1.noarch.rpm").is_file()


@pytest.mark.integration
def test_cuda_keyring_has_nvidias_shape_and_the_mirror_key(
    built: MirrorContent, keyring: Path, tmp_path: Path
) -> None:
    for name in mirror.APT_REPOS:
        deb = repo(built, name) / "cuda-keyring_1.1-1_all.deb"
        files = {
            line.split()[-1].lstrip(".")
            for line in run("dpkg-deb", "-c", deb).stdout.splitlines()
            if not line.startswith("d")
        }
        expected = {
            f"/etc/apt/sources.list.d/cuda-{name}-x86_64.list",
            "/usr/share/keyrings/cuda-archive-keyring.gpg",
            "/usr/share/doc/cuda-keyring/STANDIN",
        }
        if name.startswith("ubuntu"):
            expected.add("/etc/apt/preferences.d/cuda-repository-pin-600")
        assert files == expected, name
        root = extract(deb, tmp_path / name)
        assert (root / f"etc/apt/sources.list.d/cuda-{name}-x86_64.list").read_text() == (
            "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
            f"http://mirror/cuda/repos/{name}/x86_64/ /\n"  # the mirror's alias in place of NVIDIA's host
        )
        # A binary keyring holding the mirror's key (NVIDIA's holds 3bf863cc), as apt's signed-by reads it.
        assert (root / "usr/share/keyrings/cuda-archive-keyring.gpg").read_bytes() == keyring.read_bytes()
    control = run("dpkg-deb", "-f", repo(built, "debian12") / "cuda-keyring_1.1-1_all.deb").stdout
    assert "Package: cuda-keyring\nVersion: 1.1-1\nArchitecture: all\n" in control


@pytest.mark.integration
def test_headers_carry_the_real_version_defines(built: MirrorContent, tmp_path: Path) -> None:
    d = repo(built, "debian12")
    nccl = extract(d / "libnccl-dev_2.21.5-1+cuda12.4_amd64.deb", tmp_path / "nccl") / "usr/include/nccl.h"
    assert re.search(r"#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define NCCL_PATCH 5\n", nccl.read_text())
    cudnn = extract(d / "libcudnn9-dev-cuda-12_9.5.1.17-1_amd64.deb", tmp_path / "cudnn") / "usr/include"
    text = (cudnn / "cudnn_version.h").read_text()
    assert "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 5\n#define CUDNN_PATCHLEVEL 1\n" in text


@pytest.mark.integration
def test_driver_libraries_load_under_their_real_soname(built: MirrorContent, tmp_path: Path) -> None:
    deb = repo(built, "debian12") / "libnvidia-compute-550_550.127.08-1_amd64.deb"
    libdir = extract(deb, tmp_path) / "usr/lib/x86_64-linux-gnu"
    assert os.readlink(libdir / "libcuda.so.1") == "libcuda.so.550.127.08"
    assert os.readlink(libdir / "libnvidia-ml.so.1") == "libnvidia-ml.so.550.127.08"
    library = ctypes.CDLL(str(libdir / "libcuda.so.1"))  # a real ELF: dlopen works, symbols do not
    with pytest.raises(AttributeError):
        library.cuInit  # noqa: B018
    if shutil.which("ldconfig"):
        (libdir / "libcuda.so.1").unlink()
        assert "libcuda.so.1 -> libcuda.so.550.127.08" in run("ldconfig", "-n", "-v", libdir).stdout


@pytest.mark.integration
def test_debian_named_driver_packages_carry_the_same_payloads(built: MirrorContent, tmp_path: Path) -> None:
    d = repo(built, "debian12")
    libdir = extract(d / "libcuda1_550.127.08-1_amd64.deb", tmp_path / "cuda") / "usr/lib/x86_64-linux-gnu"
    assert os.readlink(libdir / "libcuda.so.1") == "libcuda.so.550.127.08"
    ctypes.CDLL(str(libdir / "libcuda.so.1"))
    ml = extract(d / "libnvidia-ml1_550.127.08-1_amd64.deb", tmp_path / "ml") / "usr/lib/x86_64-linux-gnu"
    assert os.readlink(ml / "libnvidia-ml.so.1") == "libnvidia-ml.so.550.127.08"
    tool = extract(d / "nvidia-smi_550.127.08-1_amd64.deb", tmp_path / "smi") / "usr/bin/nvidia-smi"
    proc = smi(tool, tmp_path / "absent.conf")
    assert (proc.returncode, proc.stdout) == (6, "No devices were found\n")
    daemon = extract(d / "nvidia-persistenced_550.127.08-1_amd64.deb", tmp_path / "pd")
    assert (daemon / "usr/lib/systemd/system/nvidia-persistenced.service").is_file()
    newer = extract(d / "nvidia-smi_570.124.06-1_amd64.deb", tmp_path / "smi570") / "usr/bin/nvidia-smi"
    assert 'DRIVER_VERSION="570.124.06"' in newer.read_text()
