"""The sandbox mirror, built once per module with the real tools (dpkg-deb, apt-ftparchive, rpmbuild, gpg).

The module's mirror leaves out the PyPI index (wheels=None) to stay quick; the index is tested on fake
wheels here and for real, torch installed into a venv, in the integration-marked test at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov import lock
from gpuprov.errors import EnvironmentProblem, GpuprovError
from gpuprov.sandbox import mirror, standins
from gpuprov.sandbox.inventory import SANDBOX_LOCK
from gpuprov.sandbox.mirror import APT_REPOS, RPM_REPOS, MirrorContent
from gpuprov.sandbox.standins import CATALOGUE, ContainerToolkitRelease, NcclRelease

TOOLS = ("dpkg-deb", "apt-ftparchive", "rpmbuild", "rpmsign", "createrepo_c", "gpg", "gpgv")
# Tests that build a mirror with the real tools (every one that uses the `built` or `cache` fixture) are
# marked integration: the build takes half a minute or more, which the fast lane leaves out.
pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS) and os.geteuid() != 0,
    reason="needs the mirror's build tools (installed automatically only as root)",
)

SMALL = dataclasses.replace(
    CATALOGUE, drivers=(), cuda=(), cudnn=(), nccl=(), dcgm=(), container_toolkit=CATALOGUE.container_toolkit
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def built(cache: Path) -> MirrorContent:
    return mirror.ensure_content(CATALOGUE, None, cache=cache)


@pytest.fixture(scope="module")
def keyring(built: MirrorContent, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published key as a binary keyring, which gpgv and apt's signed-by read."""
    path = tmp_path_factory.mktemp("keyring") / "gpuprov-sandbox.gpg"
    armored = (built.root / mirror.KEY_FILE).read_bytes()
    subprocess.run(["gpg", "--batch", "--dearmor", "-o", str(path)], input=armored, check=True)
    return path


@pytest.fixture(scope="module")
def served(built: MirrorContent) -> Iterator[str]:
    """The mirror over plain HTTP on loopback, as the sandbox's mirror container serves it."""
    with _serve(built.root) as url:
        yield url


@contextlib.contextmanager
def _serve(root: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def repo(content: MirrorContent, name: str) -> Path:
    return content.root / "cuda" / "repos" / name / "x86_64"


def run(*cmd: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]


def extract(deb: Path, into: Path) -> Path:
    subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)
    return into


def paragraphs(packages_file: Path) -> list[dict[str, str]]:
    result = []
    for block in packages_file.read_text().strip().split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): (.*)$", block, re.MULTILINE))
        result.append(fields)
    return result


# --------------------------------------------------------------------------------------------------------
# Layout and keys


@pytest.mark.integration
def test_layout_mimics_nvidia_repositories(built: MirrorContent) -> None:
    assert re.fullmatch(r"[0-9A-F]{40}", built.key_fingerprint)
    assert built.key_file_name == built.key_fingerprint[-8:].lower() + ".pub"
    for name in APT_REPOS:
        for f in ("Packages", "Packages.gz", "Release", "Release.gpg", "InRelease", built.key_file_name):
            assert (repo(built, name) / f).is_file(), f"{name}/{f}"
    for name in RPM_REPOS:
        for f in ("repodata/repomd.xml", "repodata/repomd.xml.asc", built.key_file_name):
            assert (repo(built, name) / f).is_file(), f"{name}/{f}"
    assert (built.root / "keys" / "gpuprov-sandbox.asc").read_text().startswith("-----BEGIN PGP PUBLIC KEY")


@pytest.mark.integration
def test_private_key_stays_out_of_the_served_root(built: MirrorContent, cache: Path) -> None:
    assert (cache / "mirror-key").stat().st_mode & 0o777 == 0o700
    assert not list(built.root.rglob("private-keys-v1.d"))
    for f in built.root.rglob("*"):
        if f.is_file() and f.suffix in {".asc", ".pub", ".gpg", ""}:
            assert b"PRIVATE KEY" not in f.read_bytes(), f


@pytest.mark.integration
def test_key_uid_says_it_is_a_stand_in(built: MirrorContent) -> None:
    shown = run(
        "gpg",
        "--batch",
        "--with-colons",
        "--import-options",
        "show-only",
        "--import",
        built.root / mirror.KEY_FILE,
    ).stdout
    assert "gpuprov sandbox mirror (stand-in for NVIDIA CUDA repository)" in shown
    assert f"fpr:::::::::{built.key_fingerprint}:" in shown


# --------------------------------------------------------------------------------------------------------
# apt


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
    assert versions["nvidia-container-toolkit"] == {"1.17.3-1"}
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
    branches = {"535.216.03-1", "550.127.08-1", "570.124.06-1"}
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
    assert "570.124.06-1" in unpinned.stdout + unpinned.stderr

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
            f"https://developer.download.nvidia.com/compute/cuda/repos/{name}/x86_64/ /\n"
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


# --------------------------------------------------------------------------------------------------------
# nvidia-smi


@pytest.fixture(scope="module")
def nvidia_smi(built: MirrorContent, tmp_path_factory: pytest.TempPathFactory) -> Path:
    deb = repo(built, "debian12") / "nvidia-utils-550_550.127.08-1_amd64.deb"
    return extract(deb, tmp_path_factory.mktemp("utils")) / "usr/bin/nvidia-smi"


def smi(tool: Path, conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(tool, *args, env={**os.environ, "GPUPROV_STANDIN_GPUS_CONF": str(conf)})


@pytest.mark.integration
def test_nvidia_smi_without_gpus_behaves_like_the_real_one(nvidia_smi: Path, tmp_path: Path) -> None:
    for args in ((), ("-L",), ("--query-gpu=name", "--format=csv")):
        proc = smi(nvidia_smi, tmp_path / "absent.conf", *args)
        assert (proc.returncode, proc.stdout) == (6, "No devices were found\n")
    assert "gpuprov sandbox stand-in" in smi(nvidia_smi, tmp_path / "absent.conf", "--help").stdout


@pytest.mark.integration
def test_nvidia_smi_reports_simulated_gpus(nvidia_smi: Path, tmp_path: Path) -> None:
    conf = tmp_path / "standin-gpus.conf"
    conf.write_text('GPU_COUNT=2\nGPU_NAME="NVIDIA H100 80GB HBM3"\nMEMORY_MIB=81559\n')

    listed = smi(nvidia_smi, conf, "-L")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert len(lines) == 2
    uuid = r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
    for i, line in enumerate(lines):
        assert re.fullmatch(rf"GPU {i}: NVIDIA H100 80GB HBM3 \(UUID: {uuid}\)", line)

    query = "--query-gpu=index,name,driver_version,memory.total,uuid"
    csv = smi(nvidia_smi, conf, query, "--format=csv").stdout.splitlines()
    assert csv[0] == "index, name, driver_version, memory.total [MiB], uuid"
    assert csv[1].startswith("0, NVIDIA H100 80GB HBM3, 550.127.08, 81559 MiB, GPU-")
    assert len(csv) == 3
    bare = smi(nvidia_smi, conf, query, "--format=csv,noheader,nounits").stdout.splitlines()
    assert [line.split(", ")[:4] for line in bare] == [
        ["0", "NVIDIA H100 80GB HBM3", "550.127.08", "81559"],
        ["1", "NVIDIA H100 80GB HBM3", "550.127.08", "81559"],
    ]
    assert bare[0].split(", ")[4] == lines[0].split("UUID: ")[1].rstrip(")")  # same UUIDs as -L

    table = smi(nvidia_smi, conf).stdout
    assert "Driver Version: 550.127.08     CUDA Version: 12.4" in table
    assert table.count("NVIDIA H100 80GB HBM3") == 2
    assert {len(line) for line in table.splitlines()[1:] if line.startswith(("|", "+"))} == {91}

    bad = smi(nvidia_smi, conf, "--query-gpu=bogus", "--format=csv")
    assert bad.returncode == 2 and 'Field "bogus" is not a valid field to query.' in bad.stderr


# --------------------------------------------------------------------------------------------------------
# rpm


@pytest.fixture(scope="module")
def rpms(built: MirrorContent) -> list[Path]:
    return sorted(repo(built, "rhel9").glob("*.rpm"))


@pytest.mark.integration
def test_rpms_carry_nvidia_names_and_versions(rpms: list[Path]) -> None:
    query = run("rpm", "-qp", "--qf", r"%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE} %{ARCH}\n", *rpms).stdout
    found = set(query.splitlines())
    for expected in (
        # NVIDIA's driver rpms carry epoch 3 (nvidia-driver.spec, NVIDIA/yum-packaging-nvidia-driver).
        "nvidia-driver 3:550.127.08-1 x86_64",
        "nvidia-driver-cuda 3:535.216.03-1 x86_64",
        "nvidia-driver-cuda-libs 3:550.127.08-1 x86_64",
        "nvidia-kmod-common 3:550.127.08-1 x86_64",
        "kmod-nvidia-open-dkms 3:570.124.06-1 x86_64",
        "nvidia-fabric-manager 0:550.127.08-1 x86_64",
        "cuda-toolkit-12-8 0:12.8.1-1 x86_64",
        "libcudnn9-devel-cuda-12 0:9.5.1.17-1 x86_64",
        "libcudnn8 0:8.9.7.29-1.cuda12.2 x86_64",
        "libnccl 0:2.21.5-1+cuda12.4 x86_64",
        "libnccl-devel 0:2.26.2-1+cuda12.8 x86_64",
        "datacenter-gpu-manager 1:3.3.9-1 x86_64",
        "nvidia-container-toolkit-base 0:1.17.3-1 x86_64",
    ):
        assert expected in found
    carried = CATALOGUE.carrying(mirror.repository_cuda()["rhel9"])
    assert len(found) == len(rpms) == len(standins.rpm_packages(carried))


@pytest.mark.integration
def test_rpms_are_signed_and_verify_after_importing_the_key(
    built: MirrorContent, rpms: list[Path], tmp_path: Path
) -> None:
    dbpath = ["--dbpath", str(tmp_path / "rpmdb")]
    (tmp_path / "rpmdb").mkdir()
    assert run("rpm", *dbpath, "--import", repo(built, "rhel9") / built.key_file_name).returncode == 0
    checked = run("rpm", *dbpath, "-K", *rpms)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("digests signatures OK") == len(rpms)


@pytest.mark.integration
def test_rpms_require_nothing_but_other_stand_ins(rpms: list[Path]) -> None:
    """The test hosts' rpm database starts empty: no /bin/sh, no sonames, no files outside the mirror."""
    provided = set(run("rpm", "-qp", "--provides", *rpms).stdout.split())
    for rpm_file in rpms:
        for line in run("rpm", "-qp", "--requires", rpm_file).stdout.splitlines():
            name = line.split()[0]
            assert name.startswith("rpmlib(") or name in provided, f"{rpm_file.name} requires {line}"


@pytest.mark.integration
def test_repomd_signature_verifies(built: MirrorContent, keyring: Path) -> None:
    for name in RPM_REPOS:
        repomd = repo(built, name) / "repodata" / "repomd.xml"
        assert run("gpgv", "--keyring", keyring, f"{repomd}.asc", repomd).returncode == 0


@pytest.mark.integration
@pytest.mark.skipif(
    shutil.which("dnf") is None or os.geteuid() != 0, reason="needs dnf (as on the rocky-like hosts) and root"
)
def test_dnf_installs_with_package_and_metadata_signatures_checked(
    built: MirrorContent, served: str, tmp_path: Path
) -> None:
    base = f"{served}/cuda/repos/rhel9/x86_64"
    conf = tmp_path / "dnf.conf"
    conf.write_text(
        f"[main]\nreposdir={tmp_path / 'none'}\n\n[standin]\nname=stand-in\nbaseurl={base}\n"
        f"gpgcheck=1\nrepo_gpgcheck=1\ngpgkey={base}/{built.key_file_name}\n"
    )
    dnf = ["dnf", "-y", "-c", conf, f"--installroot={tmp_path / 'root'}", "--releasever=9"]
    try:
        packages = [
            "nvidia-driver-cuda-550.127.08",
            "libnccl-2.21.5-1+cuda12.4",
            "kmod-nvidia-open-dkms-550.127.08",
        ]
        # NVIDIA's module metadata: the default stream (latest-dkms) hides the older branches...
        hidden = run(*dnf, "install", *packages)
        # ...until the branch's stream is enabled, and another stream cannot simply be enabled over it.
        enabled = run(*dnf, "module", "enable", "nvidia-driver:550-open")
        refused = run(*dnf, "module", "enable", "nvidia-driver:570-open")
        proc = run(*dnf, "install", *packages)
    finally:
        # repo_gpgcheck makes dnf start a gpg-agent on its keyring in the install root; stop it.
        for pubring in (tmp_path / "root").glob("var/cache/dnf/*/pubring"):
            run("gpgconf", "--homedir", pubring, "--kill", "gpg-agent")
    assert hidden.returncode != 0 and "nvidia-driver-cuda-550.127.08" in hidden.stderr
    assert enabled.returncode == 0, enabled.stderr[-2000:]
    assert refused.returncode != 0 and "module_stream_switch" in refused.stderr
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert os.readlink(tmp_path / "root/usr/lib64/libcuda.so.1") == "libcuda.so.550.127.08"


# --------------------------------------------------------------------------------------------------------
# What each repository carries: the CUDA releases of NVIDIA's repository of that name


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
    driver = {"debian12": "nvidia-driver-cuda", "ubuntu2204": "nvidia-headless-550-open"}.get(
        name, "nvidia-driver"
    )
    assert f"{lock_['driver_version']}-1" in versions[driver]


@pytest.mark.integration
def test_ubuntu2404_starts_after_the_sandbox_lock_cuda(built: MirrorContent) -> None:
    """NVIDIA's ubuntu2404 repository has no CUDA 12.2/12.4; no sandbox node uses it."""
    versions = _repository_versions(built, "ubuntu2404")
    assert "cuda-toolkit-12-4" not in versions and "cuda-toolkit-12-2" not in versions
    assert versions["cuda-toolkit-12-6"] == {"12.6.3-1"}


def test_carrying_keeps_the_builds_for_the_carried_cuda_only() -> None:
    only_12_4 = CATALOGUE.carrying({"12.4.1"})
    assert [c.version for c in only_12_4.cuda] == ["12.4.1"]
    assert [(c.version, c.cuda) for c in only_12_4.cudnn] == [("9.5.1.17", "12")]  # cuDNN 9: per CUDA major
    assert [(n.version, n.cuda) for n in only_12_4.nccl] == [("2.21.5", "12.4")]
    assert only_12_4.drivers == CATALOGUE.drivers and only_12_4.dcgm == CATALOGUE.dcgm
    assert CATALOGUE.carrying(set()).cudnn == ()


def test_repository_cuda_reads_the_table_and_refuses_a_missing_repository() -> None:
    table = lock.load_table()
    carried = mirror.repository_cuda(table)
    assert carried["debian12"] == frozenset(table["os_repositories"]["debian12"]["cuda"])
    assert "12.2.2" not in carried["debian12"] and "12.2.2" in carried["rhel9"]
    without = {"os_repositories": {k: v for k, v in table["os_repositories"].items() if k != "ubuntu2004"}}
    with pytest.raises(GpuprovError, match=r"os_repositories\.ubuntu2004"):
        mirror.repository_cuda(without)


def test_content_hash_follows_the_repositories_cuda() -> None:
    carried = mirror.repository_cuda()
    base = mirror.content_hash(CATALOGUE, None, carried)
    assert mirror.content_hash(CATALOGUE, None) == base
    more = {**carried, "debian12": carried["debian12"] | {"12.2.2"}}
    assert mirror.content_hash(CATALOGUE, None, more) != base


# --------------------------------------------------------------------------------------------------------
# Caching, content hash, atomic builds


@pytest.mark.integration
def test_second_call_is_a_cache_hit(
    built: MirrorContent, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*args: object) -> MirrorContent:
        raise AssertionError("rebuilt a mirror that exists")

    monkeypatch.setattr(mirror, "_build", no_build)
    started = time.perf_counter()
    again = mirror.ensure_content(CATALOGUE, None, cache=cache)
    assert time.perf_counter() - started < 0.2
    assert again == built


def test_content_hash_follows_catalogue_and_wheel_spec() -> None:
    base = mirror.content_hash(CATALOGUE, mirror.WHEELS)
    assert re.fullmatch(r"[0-9a-f]{12}", base)
    assert mirror.content_hash(CATALOGUE, mirror.WHEELS) == base
    more_nccl = dataclasses.replace(CATALOGUE, nccl=(*CATALOGUE.nccl, NcclRelease("2.27.3", "12.9")))
    assert mirror.content_hash(more_nccl, mirror.WHEELS) != base
    assert mirror.content_hash(CATALOGUE, None) != base


def test_content_hash_covers_every_file_of_the_standins_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = {name for name, _ in mirror.builder_sources()}
    assert {
        "mirror.py",
        "rpm_modules.py",
        "standins/recipes.py",
        "standins/shell.py",
        "standins/programs/nvidia-smi.sh",
    } <= names
    package_files = {
        f"standins/{p.relative_to(mirror.STANDINS_DIR).as_posix()}"
        for p in mirror.STANDINS_DIR.rglob("*")
        if p.suffix in (".py", ".sh")
    }
    assert package_files <= names

    copy = tmp_path / "standins"
    shutil.copytree(mirror.STANDINS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    base = mirror.content_hash(CATALOGUE, None)
    monkeypatch.setattr(mirror, "STANDINS_DIR", copy)
    assert mirror.content_hash(CATALOGUE, None) == base  # the same files elsewhere: the same hash
    program = copy / "programs" / "nv-hostengine.sh"
    program.write_bytes(program.read_bytes() + b"# changed\n")
    assert mirror.content_hash(CATALOGUE, None) != base


def _cache_with_key(cache: Path, tmp_path: Path) -> Path:
    """A fresh cache that reuses the module's signing key (generating one costs a few seconds)."""
    shutil.copytree(cache / "mirror-key", tmp_path / "mirror-key")
    return tmp_path


@pytest.mark.integration
def test_interrupted_build_leaves_nothing_half_made(
    built: MirrorContent, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = _cache_with_key(cache, tmp_path)

    def interrupt(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(mirror, "_publish_key", interrupt)
    with pytest.raises(KeyboardInterrupt):
        mirror.ensure_content(SMALL, None, cache=fresh)
    assert [p.name for p in (fresh / "mirror").iterdir()] == [".lock"]

    monkeypatch.undo()
    content = mirror.ensure_content(SMALL, None, cache=fresh)
    assert content.key_fingerprint == built.key_fingerprint  # the key is made once and kept
    assert "nvidia-container-toolkit" in (repo(content, "debian12") / "Packages").read_text()


@pytest.mark.integration
def test_only_the_newest_mirrors_are_kept(cache: Path, tmp_path: Path) -> None:
    fresh = _cache_with_key(cache, tmp_path)
    roots = []
    for patch in range(3):
        catalogue = dataclasses.replace(SMALL, container_toolkit=(ContainerToolkitRelease(f"1.17.{patch}"),))
        roots.append(mirror.ensure_content(catalogue, None, cache=fresh).root)
    assert [r.is_dir() for r in roots] == [False, True, True]


def test_a_failing_tool_is_one_line_not_a_traceback() -> None:
    with pytest.raises(GpuprovError, match=r"^building the sandbox mirror: 'sh -c' failed: it broke$"):
        mirror._run(["sh", "-c", "echo detail >&2; echo it broke >&2; exit 3"])
    with pytest.raises(EnvironmentProblem, match="cannot run no-such-tool-gpuprov"):
        mirror._run(["no-such-tool-gpuprov"])


# --------------------------------------------------------------------------------------------------------
# PyPI index


def test_simple_index_links_wheels_with_their_sha256(tmp_path: Path) -> None:
    wheels = tmp_path / "pypi" / "wheels"
    wheels.mkdir(parents=True)
    names = [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "typing_extensions-4.16.0-py3-none-any.whl",
    ]
    for name in names:
        (wheels / name).write_bytes(name.encode())
    mirror.write_simple_index(tmp_path / "pypi" / "simple", sorted(wheels.iterdir()))

    page = (tmp_path / "pypi/simple/torch/index.html").read_text()
    href, digest = re.search(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', page).groups()  # type: ignore[union-attr]
    assert href == "../../wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert digest == hashlib.sha256(names[0].encode()).hexdigest()
    assert (tmp_path / "pypi/simple/typing-extensions/index.html").is_file()  # PEP 503 normalised
    root = (tmp_path / "pypi/simple/index.html").read_text()
    assert '<a href="torch/">torch</a>' in root and '<a href="typing-extensions/">' in root


def test_a_cuda_build_of_torch_is_refused() -> None:
    cpu = ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "numpy-2.4.6-cp311-cp311-x.whl"]
    mirror.check_cpu_only(cpu)
    with pytest.raises(EnvironmentProblem, match="CUDA build of torch"):
        mirror.check_cpu_only(["torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"])
    with pytest.raises(EnvironmentProblem, match="CUDA build of torch"):
        mirror.check_cpu_only([*cpu, "nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl"])


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_torch_installs_from_the_mirror_index_into_a_fresh_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full mirror (real pip download) serves CPU torch to a venv that sees no other index."""
    monkeypatch.setenv("GPUPROV_CACHE_DIR", str(tmp_path / "cache"))
    content = mirror.ensure_mirror_content()
    wheels = content.root / "pypi" / "wheels"
    torch_wheel = next(wheels.glob("torch-2.13.0+cpu-*.whl"))
    page = (content.root / "pypi/simple/torch/index.html").read_text()
    assert f"#sha256={hashlib.sha256(torch_wheel.read_bytes()).hexdigest()}" in page
    assert not list(wheels.glob("nvidia*")) and not list(wheels.glob("triton*"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    isolated = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    isolated["PIP_CONFIG_FILE"] = os.devnull  # no find-links or extra index of this machine's pip config
    with _serve(content.root) as url:
        install = run(
            venv / "bin/pip",
            "install",
            "--no-cache-dir",
            "--index-url",
            f"{url}/pypi/simple",
            "torch==2.13.0",
            env=isolated,
        )
        assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    version = run(venv / "bin/python", "-c", "import torch; print(torch.__version__)", env=isolated)
    assert version.stdout.strip() == "2.13.0+cpu"


def test_pruning_keeps_the_newest_mirrors_and_every_one_a_sandbox_serves(tmp_path: Path) -> None:
    # Oldest first: mtimes 1..5. A sandbox made before the last two builds still serves the oldest.
    built = [tmp_path / f"{n:012x}" for n in range(1, 6)]
    for age, root in enumerate(built, start=1):
        root.mkdir()
        os.utime(root, (age, age))
    (tmp_path / "build-unfinished").mkdir()  # not a finished mirror's name: never touched here
    mirror._prune(tmp_path, keep=2, served=frozenset({built[0]}))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [built[0].name, built[3].name, built[4].name, "build-unfinished"]
    )


def test_served_mirrors_are_read_from_the_mirror_containers_label(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, ...]] = []

    def fake_docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        asked.append(args)
        return subprocess.CompletedProcess(args, 0, "/c/mirror/aaaaaaaaaaaa\n/c/mirror/bbbbbbbbbbbb\n", "")

    monkeypatch.setattr(mirror.docker, "run", fake_docker)
    assert mirror.served_mirrors() == {Path("/c/mirror/aaaaaaaaaaaa"), Path("/c/mirror/bbbbbbbbbbbb")}
    assert asked == [
        ("ps", "-a", "--filter", "label=gpuprov.mirror.root", "--format", '{{.Label "gpuprov.mirror.root"}}')
    ]


def test_served_mirrors_is_empty_when_docker_cannot_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "", "Cannot connect to the Docker daemon")

    monkeypatch.setattr(mirror.docker, "run", no_engine)
    assert mirror.served_mirrors() == frozenset()
