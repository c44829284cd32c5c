"""The content of the sandbox's package mirror, built once on the build machine and served read-only.

The sandbox's test hosts cannot reach NVIDIA or PyPI, so one container serves this directory over plain
HTTP. It mimics NVIDIA's CUDA repository layout, so one base-URL variable points the roles at either:

    cuda/repos/{debian12,ubuntu2004,ubuntu2204,ubuntu2404}/x86_64/   flat apt repositories, signed
    cuda/repos/{rhel8,rhel9}/x86_64/                                  rpm repositories, signed rpms and repomd
    cuda/repos/*/x86_64/<keyid>.pub                                   the public key, as NVIDIA's 3bf863cc.pub
    cuda/repos/{rhel8,rhel9}/x86_64/cuda-<os>.repo                    NVIDIA's .repo file, naming the mirror
    keys/gpuprov-sandbox.asc                                          the same key
    libnvidia-container/stable/{deb/amd64,rpm/x86_64}/, .../gpgkey    the container toolkit's repository
    rocky/9/AppStream/x86_64/os/                                      rocky9 nodes' stand-in rpms: podman,
                                                                      runc, openmpi, environment-modules,
                                                                      python3.11
    ubuntu/jammy/                                                     Debian's Open MPI under Ubuntu 22.04's
                                                                      versions, for ubuntu22.04 nodes
    pypi/simple/, pypi/wheels/                                        PEP 503 index: CPU torch, its deps, uv
    conda/Miniforge3-*.sh                                             stand-in Miniforge installer (+ .sha256)
    debian/                                                           real Debian 12 packages (Slurm, munge),
                                                                      flat apt repository, signed

The packages are the stand-ins of gpuprov.sandbox.standins. Each repository holds the CUDA toolkits that
NVIDIA's repository of its name carries (section os_repositories of gpuprov's compatibility table,
playbooks/vars/gpu_stack_compat.yml) and the cuDNN and NCCL builds for them; the drivers and tools are in
every one. A build happens only when the content hash (catalogue, each repository's CUDA releases, this
builder's source, every file of the stand-ins package, wheel spec) has no finished directory yet; it is
made in a temporary directory next to the final one and renamed into place, so an interrupted build leaves
nothing half-made.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gzip
import hashlib
import html
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuprov import console, hosttools, lock, paths
from gpuprov.errors import EnvironmentProblem, GpuprovError
from gpuprov.sandbox import (
    debian_archive,
    docker,
    rocky_openmpi,
    rocky_podman,
    rocky_python,
    rpm_modules,
    standins,
    ubuntu_openmpi,
)
from gpuprov.sandbox.standins import CATALOGUE, Catalogue, File, Format, Package, Pin
from gpuprov.sandbox.standins.keyring import cuda_keyring, repo_file, repo_file_name

# The sandbox's nodes (gpuprov.sandbox.images: debian12, ubuntu22.04, rocky9) use debian12, ubuntu2204 and
# rhel9, which carry the sandbox lock's CUDA (12.4.1, playbooks/vars/sandbox_lock.yml). NVIDIA's ubuntu2404
# repository starts after 12.4.1, so its stand-in has no 12.4.1 either; no sandbox node uses it.
APT_REPOS = ("debian12", "ubuntu2004", "ubuntu2204", "ubuntu2404")
RPM_REPOS = ("rhel8", "rhel9")
ARCH_DIR = "x86_64"
TOOLKIT_DIR = "libnvidia-container"
KEY_FILE = "keys/gpuprov-sandbox.asc"
KEY_UID = "gpuprov sandbox mirror (stand-in for NVIDIA CUDA repository)"
MAINTAINER = "gpuprov sandbox <sandbox@gpuprov.invalid>"
# Everything in the stand-ins package shapes the packages, so the content hash covers all of it.
STANDINS_DIR = Path(standins.__file__).parent
KEEP_MIRRORS = 2  # the newest ones, and any a sandbox still serves (see _prune)
# The label a sandbox's mirror container carries, naming the mirror directory it serves.
SERVED_LABEL = "gpuprov.mirror.root"

# Release fields of the apt repositories: Origin and Label are NVIDIA's, so the pin files NVIDIA
# publishes ("Pin: release l=NVIDIA CUDA") work against the mirror unchanged; Description says what it is.
APT_ORIGIN = "NVIDIA"
APT_LABEL = "NVIDIA CUDA"
APT_DESCRIPTION = "gpuprov sandbox stand-in for NVIDIA's CUDA repository (no NVIDIA software)"

HOST_TOOLS = {
    "dpkg-deb": "dpkg",
    "apt-ftparchive": "apt-utils",
    "rpmbuild": "rpm",
    "rpmsign": "rpm",
    "createrepo_c": "createrepo-c",
    "modifyrepo_c": "createrepo-c",
    "gpg": "gnupg",
    "gpgconf": "gnupg",
}
PURPOSE = "building the sandbox mirror"


@dataclass(frozen=True)
class WheelSpec:
    """What `pip download` fetches for the test hosts (Debian 12: CPython 3.11 on x86_64)."""

    requirements: tuple[str, ...]
    python_version: str
    platforms: tuple[str, ...]
    implementation: str = "cp"


# uv for python_env_venv_installer=uv: the version the python_env role pins (python_env_uv_version; a
# unit test keeps the two equal).
UV_VERSION = "0.13.9"

# "+cpu" pins the CPU build: a plain torch==2.13.0 could resolve to a CUDA build that drags in nvidia-*
# wheels. Hosts still ask for torch==2.13.0, which matches 2.13.0+cpu.
WHEELS = WheelSpec(
    requirements=("torch==2.13.0+cpu", "numpy", "pip", "setuptools", "wheel", f"uv=={UV_VERSION}"),
    python_version="3.11",
    platforms=("manylinux_2_28_x86_64", "manylinux2014_x86_64", "any"),
)
# Local wheelhouses that hold the CPU torch on the build machines; pip searches them next to PyPI.
WHEELHOUSES = (Path("/opt/wheels"),)


@dataclass(frozen=True)
class MirrorContent:
    root: Path  # directory to serve at http://MIRROR/
    key_fingerprint: str  # 40-hex fingerprint of the signing key (apt and rpm)

    @property
    def key_file_name(self) -> str:
        """Name of the public key in each repository directory, like NVIDIA's 3bf863cc.pub."""
        return f"{self.key_fingerprint[-8:].lower()}.pub"


@dataclass(frozen=True)
class SigningKey:
    home: Path  # private GNUPGHOME; never inside the served root
    fingerprint: str


class MirrorBuildError(GpuprovError):
    """A tool failed while building the mirror; the message holds the command and the tool's last line."""


def ensure_mirror_content() -> MirrorContent:
    """Build (only when missing) the mirror under cache_dir()/mirror/<content-hash>/ and return it."""
    return ensure_content(CATALOGUE, WHEELS)


def repository_cuda(table: Mapping[str, object] | None = None) -> dict[str, frozenset[str]]:
    """The CUDA toolkit releases NVIDIA's repository of each name carries, from gpuprov's compatibility
    table (gpuprov.lock reads it; section os_repositories, each entry with its sources)."""
    carried = (table if table is not None else lock.load_table()).get("os_repositories")
    repositories: dict[str, frozenset[str]] = {}
    for repo in (*APT_REPOS, *RPM_REPOS):
        entry = carried.get(repo) if isinstance(carried, Mapping) else None
        versions = entry.get("cuda") if isinstance(entry, Mapping) else None
        if not isinstance(versions, list):
            raise MirrorBuildError(
                f"{PURPOSE}: the compatibility table ({lock.table_path()}) lists no CUDA releases for "
                f"os_repositories.{repo}; add its `cuda` list"
            )
        repositories[repo] = frozenset(str(v) for v in versions)
    return repositories


def ensure_content(
    catalogue: Catalogue,
    wheels: WheelSpec | None,
    cache: Path | None = None,
    repositories: Mapping[str, frozenset[str]] | None = None,
) -> MirrorContent:
    """ensure_mirror_content for any catalogue; wheels=None leaves out the PyPI index (for quick tests);
    repositories (repository_cuda() unless given) says which CUDA releases each repository carries."""
    carried = dict(repositories) if repositories is not None else repository_cuda()
    mirrors = (cache or paths.cache_dir()) / "mirror"
    root = mirrors / content_hash(catalogue, wheels, carried)
    if root.is_dir():  # finished: a build appears under its final name only by an atomic rename
        return _reuse(root)
    mirrors.mkdir(parents=True, exist_ok=True)
    with _exclusive(mirrors / ".lock"):
        if root.is_dir():  # another process built it while we waited
            return _reuse(root)
        return _build(catalogue, carried, wheels, mirrors.parent, root)


def content_hash(
    catalogue: Catalogue, wheels: WheelSpec | None, repositories: Mapping[str, frozenset[str]] | None = None
) -> str:
    """First 12 hex of sha256 over the catalogue, each repository's CUDA releases (repository_cuda()
    unless given), builder_sources() and the wheel spec."""
    carried = repositories if repositories is not None else repository_cuda()
    digest = hashlib.sha256()
    digest.update(repr(catalogue).encode())
    digest.update(repr(sorted((repo, sorted(cuda)) for repo, cuda in carried.items())).encode())
    digest.update(repr(wheels).encode())
    for name, source in builder_sources():
        content = source.read_bytes()
        digest.update(f"{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()[:12]


def builder_sources() -> list[tuple[str, Path]]:
    """This module, rpm_modules, debian_archive, rocky_podman, rocky_openmpi, ubuntu_openmpi and every file
    of the stand-ins package (its modules, the programs they install)."""
    files = sorted(p for p in STANDINS_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [
        ("mirror.py", Path(__file__)),
        ("rpm_modules.py", Path(rpm_modules.__file__)),
        ("debian_archive.py", Path(debian_archive.__file__)),
        ("rocky_podman.py", Path(rocky_podman.__file__)),
        ("rocky_python.py", Path(rocky_python.__file__)),
        ("rocky_openmpi.py", Path(rocky_openmpi.__file__)),
        ("ubuntu_openmpi.py", Path(ubuntu_openmpi.__file__)),
        *((f"standins/{p.relative_to(STANDINS_DIR).as_posix()}", p) for p in files),
    ]


def _reuse(root: Path) -> MirrorContent:
    os.utime(root)  # recently used mirrors are the ones pruning keeps
    fingerprint = (root / "keys" / "fingerprint").read_text().strip()
    return MirrorContent(root=root, key_fingerprint=fingerprint)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """One builder at a time per cache, across processes (two pytest workers, two CLI calls)."""
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------------------
# The build


def _build(
    catalogue: Catalogue,
    repositories: Mapping[str, frozenset[str]],
    wheels: WheelSpec | None,
    cache: Path,
    root: Path,
) -> MirrorContent:
    console.step("Building sandbox package mirror (first time only)")
    started = time.monotonic()
    hosttools.ensure(HOST_TOOLS, PURPOSE)
    _remove_unfinished(root.parent)
    key = _signing_key(cache / "mirror-key")
    work = root.parent / f".build-{root.name}-{os.getpid()}"
    try:
        work.mkdir()
        out = work / "root"
        with ThreadPoolExecutor(max_workers=1) as downloader:
            # The wheel download is mostly waiting and copying: run it beside the package builds.
            download = downloader.submit(_wheelhouse, wheels, cache) if wheels else None
            _build_repositories(catalogue, repositories, work / "staging", out, key)
            _write_conda(out / "conda")
            _write_debian(out / debian_archive.REPO_DIR, work / "debian-debs", key)
            debs = work / "debian-debs"
            _write_rocky_appstream(out / rocky_podman.REPO_DIR, debs, work / "rocky-rpms", key)
            for release in ubuntu_openmpi.RELEASES:
                staged = work / f"ubuntu-debs-{release.codename}"
                _write_ubuntu_openmpi(out / release.repo_dir, debs, staged, key, release)
            if download is not None:
                _write_pypi(out / "pypi", download.result())
        shutil.rmtree(work / "staging")
        os.rename(out, root)  # the moment the mirror becomes visible, complete
    finally:
        shutil.rmtree(work, ignore_errors=True)
        _stop_gpg_agent(key.home)
    _prune(root.parent, keep=KEEP_MIRRORS, served=served_mirrors())
    console.success(f"Built sandbox package mirror in {time.monotonic() - started:.0f} s: {root}")
    return MirrorContent(root=root, key_fingerprint=key.fingerprint)


def _build_repositories(
    catalogue: Catalogue,
    repositories: Mapping[str, frozenset[str]],
    staging: Path,
    out: Path,
    key: SigningKey,
) -> None:
    debs_dir, rpms_dir = staging / "debs", staging / "rpms"
    debs_dir.mkdir(parents=True)
    rpms_dir.mkdir()
    workers = max(2, os.cpu_count() or 2)
    deb_packages = standins.deb_packages(catalogue)
    rpm_packages = standins.rpm_packages(catalogue)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # Every package is built once; each repository links the ones of the releases it carries.
        debs = list(
            pool.map(
                functools.partial(_build_deb, staging=staging, out_dir=debs_dir),
                deb_packages,
            )
        )
        rpms = list(
            pool.map(
                functools.partial(_build_rpm, staging=staging, out_dir=rpms_dir),
                rpm_packages,
            )
        )
        deb_files = _files_by_package(deb_packages, debs)
        rpm_files = _files_by_package(rpm_packages, rpms)
        # rpmsign signs one file after another; a few batches side by side use the cores.
        list(pool.map(functools.partial(_sign_rpms, key=key), _batches(rpms, workers)))
        # cuda-keyring names its own repository directory: one package per apt repository.
        keyring = _export_keyring(key)
        keyrings = {repo: _build_keyring(repo, keyring, staging / f"keyring-{repo}") for repo in APT_REPOS}
        builds = []
        for repo in APT_REPOS:
            carried = standins.deb_packages(catalogue.carrying(repositories[repo]))
            files = [*(deb_files[(p.name, p.evr)] for p in carried), keyrings[repo]]
            builds.append(pool.submit(_apt_repository, _repo_dir(out, repo), repo, files, key))
        for repo in RPM_REPOS:
            carried = standins.rpm_packages(catalogue.carrying(repositories[repo]))
            files = [rpm_files[(p.name, p.evr)] for p in carried]
            builds.append(pool.submit(_rpm_repository, _repo_dir(out, repo), repo, files, carried, key))
        for build in builds:
            build.result()  # raises what the build of that repository raised
        _toolkit_repositories(out / TOOLKIT_DIR, catalogue, deb_files, rpm_files, key)
    _publish_key(out, key)


def _files_by_package(packages: Sequence[Package], files: Sequence[Path]) -> dict[tuple[str, str], Path]:
    """Built package files by (name, evr); a repository holds one package of each."""
    by_package = {(p.name, p.evr): f for p, f in zip(packages, files, strict=True)}
    if len(by_package) != len(packages):
        raise ValueError("two stand-ins share a name and version")
    return by_package


def _build_keyring(repo: str, keyring: bytes, staging: Path) -> Path:
    """That repository's cuda-keyring, staged and built in a directory of its own (all share one name)."""
    staging.mkdir(parents=True)
    return _build_deb(cuda_keyring(repo, keyring), staging, staging)


def _export_keyring(key: SigningKey) -> bytes:
    """The public key as a binary OpenPGP keyring, the format of NVIDIA's cuda-archive-keyring.gpg."""
    result = subprocess.run(
        ["gpg", "--batch", "--quiet", "--no-tty", "--homedir", str(key.home), "--export", key.fingerprint],
        capture_output=True,
        check=False,
    )
    if result.returncode != 0 or not result.stdout:
        raise MirrorBuildError(
            f"{PURPOSE}: gpg --export of the mirror key failed: {result.stderr.decode()[-200:]}"
        )
    return result.stdout


def _repo_dir(root: Path, repo: str) -> Path:
    return root / "cuda" / "repos" / repo / ARCH_DIR


def _batches(items: Sequence[Path], count: int) -> list[list[Path]]:
    return [list(items[i::count]) for i in range(count) if items[i::count]]


def _remove_unfinished(mirrors: Path) -> None:
    """Builds that were interrupted (we hold the lock, so no build is running)."""
    for leftover in mirrors.glob(".build-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _prune(mirrors: Path, keep: int, served: frozenset[Path]) -> None:
    """Remove all but the KEEP newest mirrors, never one a sandbox's mirror container still serves (a
    sandbox made by another gpuprov version, or before a stand-in changed, would answer 404 for
    everything)."""
    finished = [d for d in mirrors.iterdir() if d.is_dir() and re.fullmatch(r"[0-9a-f]{12}", d.name)]
    finished.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    for old in finished[keep:]:
        if old in served:
            continue
        console.detail(f"removing old sandbox mirror {old}")
        shutil.rmtree(old, ignore_errors=True)


def served_mirrors() -> frozenset[Path]:
    """The mirror directories that sandbox mirror containers (running or stopped) serve, from their
    SERVED_LABEL; empty where the Docker engine cannot be asked."""
    try:
        proc = docker.run(
            "ps", "-a", "--filter", f"label={SERVED_LABEL}", "--format", f'{{{{.Label "{SERVED_LABEL}"}}}}',
            check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    if proc.returncode != 0:
        return frozenset()
    return frozenset(Path(line) for line in proc.stdout.split() if line)


def _run(
    cmd: Sequence[str], cwd: Path | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    console.detail("$ " + " ".join(cmd))
    try:
        proc = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise EnvironmentProblem(f"{PURPOSE}: cannot run {cmd[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()
        raise MirrorBuildError(f"{PURPOSE}: '{' '.join(cmd[:2])}' failed: {lines[-1]}")
    return proc


# --------------------------------------------------------------------------------------------------------
# Signing key


def _signing_key(home: Path) -> SigningKey:
    """The mirror's key, generated once into a private GNUPGHOME (the secret key never enters the root)."""
    fingerprint = _fingerprint(home) if home.is_dir() else None
    if fingerprint is None:
        _generate_key(home)
        fingerprint = _fingerprint(home)
        if fingerprint is None:
            raise MirrorBuildError(f"{PURPOSE}: gpg made no key in {home}")
    return SigningKey(home=home, fingerprint=fingerprint)


def _generate_key(home: Path) -> None:
    console.detail(f"generating the sandbox mirror's signing key in {home}")
    fresh = home.with_name(f"{home.name}.new-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(mode=0o700, parents=True)
    name, comment = KEY_UID.split(" (", 1)
    parameters = (
        "%no-protection\n"
        "Key-Type: RSA\nKey-Length: 3072\nKey-Usage: sign\n"
        f"Name-Real: {name}\nName-Comment: {comment.rstrip(')')}\n"
        "Expire-Date: 0\n%commit\n"
    )
    try:
        _gpg(fresh, "--gen-key", input=parameters)
    finally:
        _stop_gpg_agent(fresh)
    shutil.rmtree(home, ignore_errors=True)  # a home without a usable key
    os.rename(fresh, home)


def _fingerprint(home: Path) -> str | None:
    listing = _gpg(home, "--with-colons", "--list-secret-keys").stdout
    fingerprints = [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")]
    return fingerprints[0] if fingerprints else None


def _gpg(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return _run(["gpg", "--batch", "--quiet", "--no-tty", "--homedir", str(home), *args], input=input)


def _sign(key: SigningKey, *args: str) -> None:
    _gpg(key.home, "--yes", "--local-user", key.fingerprint, "--digest-algo", "SHA512", *args)


def _stop_gpg_agent(home: Path) -> None:
    """gpg leaves an agent running per GNUPGHOME; a build should not leave processes behind."""
    if home.is_dir():
        subprocess.run(
            ["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True, check=False
        )


def _publish_key(out: Path, key: SigningKey) -> None:
    public = _gpg(key.home, "--armor", "--export", key.fingerprint).stdout
    (out / "keys").mkdir(parents=True)
    (out / KEY_FILE).write_text(public)
    (out / "keys" / "fingerprint").write_text(key.fingerprint + "\n")
    name = MirrorContent(out, key.fingerprint).key_file_name
    for repo in (*APT_REPOS, *RPM_REPOS):
        (_repo_dir(out, repo) / name).write_text(public)
    # The .repo file NVIDIA's guide adds with `dnf config-manager --add-repo`, beside the key it names.
    for repo in RPM_REPOS:
        (_repo_dir(out, repo) / repo_file_name(repo)).write_text(repo_file(repo, name))


# --------------------------------------------------------------------------------------------------------
# Packages


def _stage(package: Package, tree: Path) -> None:
    """Write the package's files and links under tree, with modes that do not depend on the umask."""
    for entry in package.entries:
        dest = tree / entry.path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, File):
            dest.write_bytes(entry.content)
            dest.chmod(entry.mode)
        else:
            dest.symlink_to(entry.target)
    for directory in (tree, *(p for p in tree.rglob("*") if p.is_dir() and not p.is_symlink())):
        directory.chmod(0o755)


def _long_description(package: Package) -> str:
    return (
        f"This package has the name and version of NVIDIA's {package.name} but is a stand-in built by "
        "gpuprov for its sandbox: small scripts, version headers and code-free libraries, no NVIDIA software."
    )


def _build_deb(package: Package, staging: Path, out_dir: Path) -> Path:
    tree = staging / f"deb-{package.name}_{package.evr.replace(':', '_')}"
    _stage(package, tree)
    control_dir = tree / "DEBIAN"
    control_dir.mkdir(mode=0o755)
    (control_dir / "control").write_text(deb_control(package, _installed_kib(package)))
    conffiles = [e.path for e in package.entries if e.path.startswith("/etc/")]
    if conffiles:
        (control_dir / "conffiles").write_text("".join(f"{path}\n" for path in conffiles))
    scripts = {"postinst": package.postinst, "postrm": ""}
    if package.runs_ldconfig:
        scripts = {name: (text or "#!/bin/sh\n") + _DEB_LDCONFIG for name, text in scripts.items()}
    for script, text in scripts.items():
        if text:
            (control_dir / script).write_text(text)
            (control_dir / script).chmod(0o755)
    version = package.evr.split(":", 1)[-1]  # .deb file names leave out the epoch
    deb = out_dir / f"{package.name}_{version}_{_deb_arch(package)}.deb"
    _run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(tree), str(deb)])
    return deb


_DEB_LDCONFIG = """\
# The stand-in installs (code-free) shared libraries: refresh the linker cache where the host has one.
command -v ldconfig >/dev/null && ldconfig || true
"""


def _deb_arch(package: Package) -> str:
    return "all" if package.arch_independent else "amd64"


def _pin(pin: Pin, fmt: Format) -> str:
    """ "name (= 1.0-1)" for apt, "name = 1.0-1" for rpm; the bare name when any version will do."""
    if not pin.evr:
        return pin.name
    return f"{pin.name} (= {pin.evr})" if fmt is Format.DEB else f"{pin.name} = {pin.evr}"


def _installed_kib(package: Package) -> int:
    return sum(max(1, -(-len(e.content) // 1024)) for e in package.entries if isinstance(e, File))


def deb_control(package: Package, installed_kib: int) -> str:
    group = [package.exclusive_group] if package.exclusive_group else []
    fields = {
        "Package": package.name,
        "Version": package.evr,
        "Architecture": _deb_arch(package),
        "Maintainer": MAINTAINER,
        "Installed-Size": str(installed_kib),
        "Depends": ", ".join(
            " | ".join(_pin(p, Format.DEB) for p in alternatives) for alternatives in package.depends
        ),
        "Provides": ", ".join([*(_pin(p, Format.DEB) for p in package.provides), *group]),
        "Conflicts": ", ".join([*package.conflicts, *group]),
        "Replaces": package.exclusive_group,
        "Section": "multiverse/devel",
        "Priority": "optional",
        "Description": f"{package.summary} (gpuprov sandbox stand-in)\n {_long_description(package)}",
    }
    return "".join(f"{name}: {value}\n" for name, value in fields.items() if value)


def _build_rpm(package: Package, staging: Path, out_dir: Path) -> Path:
    label = f"{package.name}-{package.evr.replace(':', '_')}"
    tree, top = staging / f"rpm-{label}", staging / f"rpmbuild-{label}"
    _stage(package, tree)
    top.mkdir()
    spec = top / f"{package.name}.spec"
    spec.write_text(rpm_spec(package, tree))
    _run(
        [
            "rpmbuild",
            "-bb",
            "--quiet",
            "--define",
            f"_topdir {top}",
            "--define",
            f"_rpmdir {out_dir}",
            "--define",
            "_rpmfilename %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
            "--define",
            "_build_id_links none",
            "--define",
            "__os_install_post %{nil}",  # no stripping or byte-compiling of the stand-ins
            "--define",
            "debug_package %{nil}",
            "--define",
            "_binary_payload w2.gzdio",  # gzip: every rpm and dnf reads it, and it is quick
            "--define",
            "_buildhost gpuprov-sandbox",
            str(spec),
        ]
    )
    arch = "noarch" if package.arch_independent else "x86_64"
    return out_dir / f"{package.name}-{package.version}-{package.release}.{arch}.rpm"


# Directories that belong to the base system, not to a stand-in.
_SYSTEM_DIRS = frozenset(
    {
        "/etc",
        "/etc/ld.so.conf.d",
        "/usr",
        "/usr/bin",
        "/usr/include",
        "/usr/lib",
        "/usr/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/systemd",
        "/usr/lib/systemd/system",
        "/usr/local",
        "/usr/share",
        "/usr/share/doc",
        "/usr/src",
    }
)


def rpm_spec(package: Package, tree: Path) -> str:
    if any(len(alternatives) > 1 for alternatives in package.depends):
        raise ValueError(f"rpm stand-in {package.name} has alternative dependencies; use single pins")
    header = {
        "Name": package.name,
        "Epoch": str(package.epoch) if package.epoch else "",
        "Version": package.version,
        "Release": package.release,
        "Summary": f"{package.summary} (gpuprov sandbox stand-in)",
        "License": "Apache-2.0",
        "Packager": MAINTAINER,
        "BuildArch": "noarch" if package.arch_independent else "x86_64",
        "AutoReqProv": "no",  # the test hosts' rpm database starts empty: require only other stand-ins
    }
    lines = [f"{tag}: {value}" for tag, value in header.items() if value]
    lines += [f"Requires: {_pin(p, Format.RPM)}" for (p,) in package.depends]
    lines += [f"Provides: {_pin(p, Format.RPM)}" for p in package.provides]
    lines += [f"Conflicts: {name}" for name in package.conflicts]
    lines += ["", "%description", _long_description(package)]
    lines += ["", "%install", f"cp -a '{tree}/.' '%{{buildroot}}/'"]
    if package.runs_ldconfig:
        lines += ["", "%post -p <lua>", _RPM_LDCONFIG, "", "%postun -p <lua>", _RPM_LDCONFIG]
    lines += ["", "%files", "%defattr(-,root,root,-)", *_rpm_file_list(package)]
    return "\n".join(lines) + "\n"


# Lua, not sh: a shell scriptlet would make rpmbuild add "Requires: /bin/sh", which nothing provides in
# the test hosts' empty rpm database.
_RPM_LDCONFIG = (
    'if rpm.execute and posix.access("/sbin/ldconfig", "x") then rpm.execute("/sbin/ldconfig") end'
)


def _rpm_file_list(package: Package) -> list[str]:
    owned_dirs: set[str] = set()
    for entry in package.entries:
        parent = entry.path.rsplit("/", 1)[0]
        while parent and parent not in _SYSTEM_DIRS:
            owned_dirs.add(parent)
            parent = parent.rsplit("/", 1)[0]
    listing = [f"%dir {d}" for d in sorted(owned_dirs)]
    for entry in package.entries:
        config = isinstance(entry, File) and entry.path.startswith("/etc/")
        listing.append(f"%config(noreplace) {entry.path}" if config else entry.path)
    return listing


def _sign_rpms(rpms: list[Path], key: SigningKey) -> None:
    _run(
        [
            "rpmsign",
            "--addsign",
            "--define",
            f"_gpg_name {key.fingerprint}",
            "--define",
            f"_gpg_path {key.home}",
            # Debian's rpm names /usr/bin/gpg2, which Debian does not ship.
            "--define",
            f"__gpg {shutil.which('gpg') or 'gpg'}",
            *map(str, rpms),
        ]
    )


# --------------------------------------------------------------------------------------------------------
# Repositories


def _link_all(files: Sequence[Path], directory: Path) -> None:
    """The same package files in every repository: hard links, so they cost the disk once."""
    directory.mkdir(parents=True, exist_ok=True)
    for f in files:
        try:
            os.link(f, directory / f.name)
        except OSError:  # another file system
            shutil.copy2(f, directory / f.name)


def _apt_repository(
    repo_dir: Path,
    codename: str,
    debs: Sequence[Path],
    key: SigningKey,
    origin: tuple[str, str, str] = (APT_ORIGIN, APT_LABEL, APT_DESCRIPTION),
) -> None:
    """A flat, signed apt repository: `deb [signed-by=...] http://MIRROR/cuda/repos/<codename>/x86_64/ /`;
    origin is the Release's (Origin, Label, Description)."""
    _link_all(debs, repo_dir)
    packages = _run(["apt-ftparchive", "packages", "."], cwd=repo_dir).stdout
    (repo_dir / "Packages").write_text(packages)
    with gzip.GzipFile(repo_dir / "Packages.gz", "wb", mtime=0) as compressed:
        compressed.write(packages.encode())
    release_fields = {
        "Origin": origin[0],
        "Label": origin[1],
        "Suite": codename,
        "Codename": codename,
        "Architectures": "amd64",
        "Description": origin[2],
    }
    options = [f"-oAPT::FTPArchive::Release::{name}={value}" for name, value in release_fields.items()]
    # Captured, then written: apt-ftparchive would otherwise list a half-written Release in itself.
    release = _run(["apt-ftparchive", *options, "release", "."], cwd=repo_dir).stdout
    (repo_dir / "Release").write_text(release)
    release_file = str(repo_dir / "Release")
    _sign(key, "--clearsign", "--output", str(repo_dir / "InRelease"), release_file)
    _sign(key, "--armor", "--detach-sign", "--output", str(repo_dir / "Release.gpg"), release_file)


def _rpm_repository(
    repo_dir: Path, repo: str, rpms: Sequence[Path], packages: Sequence[Package], key: SigningKey
) -> None:
    """An rpm repository with signed packages, NVIDIA's dnf module metadata for the driver (see
    gpuprov.sandbox.rpm_modules) and a signed repomd.xml (for gpgcheck and repo_gpgcheck)."""
    _link_all(rpms, repo_dir)
    _run(["createrepo_c", "--quiet", "--workers", "1", str(repo_dir)])
    # As NVIDIA's repo-rpm.sh: modules.yaml written beside the rpms, added with modifyrepo_c.
    modules = repo_dir / "modules.yaml"
    modules.write_text(rpm_modules.modules_yaml(packages, distro=repo))
    _run(["modifyrepo_c", "--mdtype", "modules", str(modules), str(repo_dir / "repodata")])
    repomd = repo_dir / "repodata" / "repomd.xml"
    _sign(key, "--armor", "--detach-sign", "--output", f"{repomd}.asc", str(repomd))


# --------------------------------------------------------------------------------------------------------
# NVIDIA's libnvidia-container repository (the container toolkit's own)


def _toolkit_repositories(
    root: Path,
    catalogue: Catalogue,
    deb_files: Mapping[tuple[str, str], Path],
    rpm_files: Mapping[tuple[str, str], Path],
    key: SigningKey,
) -> None:
    """The toolkit's stand-ins where nvidia.github.io/libnvidia-container has NVIDIA's packages: a flat apt
    repository stable/deb/amd64/, an rpm repository with signed metadata stable/rpm/x86_64/ (NVIDIA's .repo:
    repo_gpgcheck=1), and the signing key at gpgkey."""
    debs = [
        deb_files[(p.name, p.evr)]
        for t in catalogue.container_toolkit
        for p in standins.container_toolkit(t, Format.DEB)
    ]
    rpms = [
        rpm_files[(p.name, p.evr)]
        for t in catalogue.container_toolkit
        for p in standins.container_toolkit(t, Format.RPM)
    ]
    origin = (
        "NVIDIA",
        "libnvidia-container",
        "gpuprov sandbox stand-in for NVIDIA's libnvidia-container repository",
    )
    _apt_repository(root / "stable" / "deb" / "amd64", "stable", debs, key, origin)
    _plain_rpm_repository(root / "stable" / "rpm" / ARCH_DIR, rpms, key)
    (root / "gpgkey").write_text(_gpg(key.home, "--armor", "--export", key.fingerprint).stdout)


# --------------------------------------------------------------------------------------------------------
# Debian's own packages


def _write_debian(repo_dir: Path, downloads: Path, key: SigningKey) -> None:
    """The real Debian packages of gpuprov.sandbox.debian_archive as a signed flat repository."""
    debs = debian_archive.download(downloads)
    origin = (debian_archive.ORIGIN, debian_archive.LABEL, debian_archive.DESCRIPTION)
    _apt_repository(repo_dir, debian_archive.SUITE, debs, key, origin)


def _write_rocky_appstream(repo_dir: Path, debs: Path, staging: Path, key: SigningKey) -> None:
    """The rocky-like nodes' stand-in rpms, signed, with signed metadata: podman and runc
    (gpuprov.sandbox.rocky_podman), openmpi and environment-modules (gpuprov.sandbox.rocky_openmpi),
    python3.11 (gpuprov.sandbox.rocky_python)."""
    staging.mkdir()
    downloaded = sorted(debs.glob("*.deb"))
    python_debs = debian_archive.download(staging / "python-debs", (rocky_python.DEBIAN_PACKAGE,))
    packages = (
        rocky_podman.podman_package(downloaded),
        rocky_podman.runc_package(downloaded),
        rocky_openmpi.openmpi_package(downloaded),
        rocky_openmpi.environment_modules_package(downloaded),
        rocky_python.python_package(python_debs),
    )
    rpms = [_build_rpm(package, staging, staging) for package in packages]
    _sign_rpms(rpms, key)
    _plain_rpm_repository(repo_dir, rpms, key)


def _write_ubuntu_openmpi(
    repo_dir: Path, debs: Path, staging: Path, key: SigningKey, release: ubuntu_openmpi.Release
) -> None:
    """Debian's Open MPI under an Ubuntu release's names and versions (gpuprov.sandbox.ubuntu_openmpi), a
    signed flat repository whose Release names Ubuntu as its origin."""
    rebuilt = ubuntu_openmpi.reversioned(sorted(debs.glob("*.deb")), staging, release)
    _apt_repository(repo_dir, release.codename, rebuilt, key, release.origin)


def _plain_rpm_repository(repo_dir: Path, rpms: Sequence[Path], key: SigningKey) -> None:
    """An rpm repository without module metadata, its repomd.xml signed (for repo_gpgcheck)."""
    _link_all(rpms, repo_dir)
    _run(["createrepo_c", "--quiet", "--workers", "1", str(repo_dir)])
    repomd = repo_dir / "repodata" / "repomd.xml"
    _sign(key, "--armor", "--detach-sign", "--output", f"{repomd}.asc", str(repomd))


# --------------------------------------------------------------------------------------------------------
# conda


def _write_conda(conda: Path) -> None:
    """The stand-in Miniforge installer, and its sha256 as Miniforge publishes it (`sha256  name`)."""
    conda.mkdir(parents=True)
    (conda / standins.CONDA_INSTALLER_NAME).write_bytes(standins.conda_installer())
    (conda / f"{standins.CONDA_INSTALLER_NAME}.sha256").write_text(
        f"{standins.conda_installer_sha256()}  {standins.CONDA_INSTALLER_NAME}\n"
    )


# --------------------------------------------------------------------------------------------------------
# PyPI


def _wheelhouse(wheels: WheelSpec, cache: Path) -> list[Path]:
    """The spec's wheels, downloaded once into cache/mirror-wheels/<spec-hash>/ and linked into mirrors."""
    spec_hash = hashlib.sha256(repr(wheels).encode()).hexdigest()[:12]
    store = cache / "mirror-wheels"
    target = store / spec_hash
    if not target.is_dir():
        partial = store / f".download-{spec_hash}-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        try:
            _pip_download(wheels, partial)
            check_cpu_only(sorted(p.name for p in partial.iterdir()))
            os.rename(partial, target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    for other in store.iterdir():  # the mirrors hold their own links, so older downloads can go
        if other != target:
            shutil.rmtree(other, ignore_errors=True)
    return sorted(target.glob("*.whl"))


def _pip_download(wheels: WheelSpec, dest: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version",
        wheels.python_version,
        "--implementation",
        wheels.implementation,
        "--dest",
        str(dest),
    ]
    for platform in wheels.platforms:
        cmd += ["--platform", platform]
    for wheelhouse in WHEELHOUSES:
        if wheelhouse.is_dir():
            cmd += ["--find-links", str(wheelhouse)]
    cmd += wheels.requirements
    try:
        _run(cmd)
    except MirrorBuildError as exc:
        raise EnvironmentProblem(
            f"{exc.message} (the sandbox's PyPI index needs PyPI, or the CPU torch wheel in "
            f"{', '.join(map(str, WHEELHOUSES))})"
        ) from None


def check_cpu_only(filenames: Sequence[str]) -> None:
    """Refuse a download that pulled a CUDA build of torch (it depends on nvidia-* and triton wheels)."""
    cuda_wheels = [n for n in filenames if re.match(r"(nvidia[-_]|triton-)", n, re.IGNORECASE)]
    torch = [n for n in filenames if n.lower().startswith("torch-")]
    if cuda_wheels or any("+cpu" not in n for n in torch):
        found = ", ".join(torch + cuda_wheels[:3])
        raise EnvironmentProblem(
            f"{PURPOSE}: pip picked a CUDA build of torch ({found}); the sandbox needs the CPU build "
            f"(put torch-*+cpu-cp311-*.whl into {WHEELHOUSES[0]})"
        )


def normalize(project: str) -> str:
    """PEP 503 name normalisation."""
    return re.sub(r"[-_.]+", "-", project).lower()


def _write_pypi(pypi: Path, wheels: Sequence[Path]) -> None:
    wheel_dir = pypi / "wheels"
    _link_all(wheels, wheel_dir)
    write_simple_index(pypi / "simple", sorted(wheel_dir.glob("*.whl")))


def write_simple_index(simple: Path, wheels: Sequence[Path]) -> None:
    """A PEP 503 simple index over wheels that sit in ../wheels/ next to simple/."""
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        projects.setdefault(normalize(wheel.name.split("-", 1)[0]), []).append(wheel)
    for project, files in sorted(projects.items()):
        links = [
            _link(f"../../wheels/{urllib.parse.quote(f.name)}#sha256={_sha256(f)}", f.name) for f in files
        ]
        (simple / project).mkdir(parents=True, exist_ok=True)
        (simple / project / "index.html").write_text(_html_page(f"Links for {project}", links))
    links = [_link(f"{project}/", project) for project in sorted(projects)]
    (simple / "index.html").write_text(_html_page("Simple index", links))


def _link(href: str, text: str) -> str:
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a><br>'


def _html_page(title: str, links: list[str]) -> str:
    body = "\n".join(links)
    return (
        '<!DOCTYPE html>\n<html>\n<head><meta name="pypi:repository-version" content="1.0">'
        f"<title>{html.escape(title)}</title></head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body>\n</html>\n"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
