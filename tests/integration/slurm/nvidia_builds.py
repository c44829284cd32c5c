"""enroot's release packages and pyxis's release tarball, built here from NVIDIA's own sources for the
slurm_pyxis test (the sandbox nodes, like this machine, cannot reach GitHub).

The sources are git repositories of NVIDIA/enroot and NVIDIA/pyxis in the directory GPUPROV_NVIDIA_SOURCES
names (`enroot/` and `pyxis/`, bare or not); without them the test is skipped, since gpuprov carries no copy
of either. What is built, and how it differs from what NVIDIA publishes:
- enroot_4.1.2-1_amd64.deb and enroot+caps_4.1.2-1_amd64.deb, by enroot's own packaging (pkg/deb through
  dh_make and debuild, the steps of its `make deb`): the same names, versions, control fields, scripts and
  files. enroot's git submodules (musl 1.2.5, makeself 2.4.5, kernel headers 4.19.88) are not in its source
  archive, so Debian 12's stand in: musl 1.2.3 (musl-tools, with enroot's own musl.patch applied to the gcc
  wrapper's specs, so the helpers are static-pie as NVIDIA builds them), makeself 2.4.5 (the release enroot
  pins) and linux-libc-dev's headers.
- pyxis-0.24.0.tar.gz: `git archive --prefix=pyxis-0.24.0/` of the tag, the tree GitHub's tag archive holds
  (GitHub's own gzip bytes, and so its SHA-256, may differ).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SOURCES_ENV = "GPUPROV_NVIDIA_SOURCES"
ENROOT_VERSION = "4.1.2"
PYXIS_VERSION = "0.24.0"
# The command each build step needs, and the Debian package that has it.
BUILD_TOOLS = {
    "git": "git", "gcc": "gcc", "make": "make", "musl-gcc": "musl-tools", "makeself": "makeself",
    "dh_make": "dh-make", "debuild": "devscripts", "dh_apparmor": "dh-apparmor", "fakeroot": "fakeroot",
}  # fmt: skip
_MUSL_SPECS = Path("/usr/lib/x86_64-linux-musl/musl-gcc.specs")
_PACKAGER = {"DEBFULLNAME": "NVIDIA CORPORATION", "DEBEMAIL": "cudatools@nvidia.com"}  # enroot's Makefile


@dataclass(frozen=True)
class Release:
    """The built files under root: enroot/v<version>/<package file>, pyxis/<tarball>; checksums by name."""

    root: Path
    checksums: dict[str, str]


def unavailable() -> str | None:
    """Why the files cannot be built here, or None."""
    sources = os.environ.get(SOURCES_ENV)
    if not sources:
        return f"{SOURCES_ENV} names no directory with NVIDIA's enroot and pyxis git repositories"
    missing = [name for name in ("enroot", "pyxis") if not (Path(sources) / name).is_dir()]
    if missing:
        return f"{SOURCES_ENV}={sources} has no {', '.join(missing)}"
    tools = sorted({pkg for tool, pkg in BUILD_TOOLS.items() if shutil.which(tool) is None})
    if tools or not _MUSL_SPECS.is_file():
        return f"building enroot needs Debian packages {', '.join(tools or ['musl-tools'])} on this machine"
    return None


def build(out: Path) -> Release:
    """Build both into out (kept: a later call with the same sources reuses them)."""
    sources = Path(os.environ[SOURCES_ENV])
    enroot_dir = out / "enroot" / f"v{ENROOT_VERSION}"
    pyxis_dir = out / "pyxis"
    if not any(enroot_dir.glob("*.deb")):
        _build_enroot(sources / "enroot", out / "work", enroot_dir)
    tarball = pyxis_dir / f"pyxis-{PYXIS_VERSION}.tar.gz"
    if not tarball.is_file():
        pyxis_dir.mkdir(parents=True, exist_ok=True)
        _git(sources / "pyxis", "archive", "--format=tar.gz", f"--prefix=pyxis-{PYXIS_VERSION}/",
             f"--output={tarball}", f"v{PYXIS_VERSION}")  # fmt: skip
    files = [*sorted(enroot_dir.glob("*.deb")), tarball]
    return Release(out, {f.name: "sha256:" + hashlib.sha256(f.read_bytes()).hexdigest() for f in files})


def _build_enroot(repo: Path, work: Path, dest: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    tree = work / "enroot"
    tree.mkdir(parents=True)
    archive = _git(repo, "archive", f"v{ENROOT_VERSION}").stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    _stand_in_submodules(tree / "deps")
    env = {**os.environ, **_PACKAGER}
    # enroot's `make deb`, less its first `clean` (which would drop the prepared deps) and lintian.
    subprocess.run(["dh_make", "-y", "-d", "-s", "-c", "apache", "-t", str(tree / "pkg" / "deb"),
                    "-p", f"enroot_{ENROOT_VERSION}", "--createorig"],
                   cwd=tree, env=env, check=True, capture_output=True)  # fmt: skip
    shutil.copytree(tree / "pkg" / "deb" / "source", tree / "debian" / "source", dirs_exist_ok=True)
    subprocess.run(["debuild", "--no-lintian", "--preserve-env", "-us", "-uc", "-nc", "-G", "-i",
                    "--host-type", "x86_64-linux-gnu"],
                   cwd=tree, env=env, check=True, capture_output=True)  # fmt: skip
    dest.mkdir(parents=True, exist_ok=True)
    for deb in work.glob("*.deb"):
        shutil.move(deb, dest / deb.name)
    shutil.rmtree(work)


def _stand_in_submodules(deps: Path) -> None:
    """What deps/Makefile would make from the submodules, from Debian 12's packages (module docstring)."""
    dist = deps / "dist"
    (dist / "makeself" / "bin").mkdir(parents=True)
    shutil.copy2(shutil.which("makeself") or "makeself", dist / "makeself" / "bin" / "enroot-makeself")
    include = dist / "linux" / "include"
    include.mkdir(parents=True)
    for headers in (Path("/usr/include/linux"), Path("/usr/include/asm-generic"),
                    Path("/usr/include/x86_64-linux-gnu/asm")):  # fmt: skip
        shutil.copytree(headers, include / headers.name)
    # enroot's musl.patch, applied to the specs Debian's musl-gcc wrapper reads: -static-pie links rcrt1.o
    # without a dynamic linker (Debian's specs would make a dynamically linked PIE).
    specs = _MUSL_SPECS.read_text()
    specs = specs.replace("%{!shared: /usr/lib/x86_64-linux-musl/Scrt1.o}",
                          "%{static-pie: /usr/lib/x86_64-linux-musl/rcrt1.o} "
                          "%{!static-pie: %{!shared: /usr/lib/x86_64-linux-musl/Scrt1.o}}")  # fmt: skip
    specs = specs.replace("-dynamic-linker /lib/ld-musl-x86_64.so.1",
                          "%{static-pie:-no-dynamic-linker -static -pie} "
                          "%{!static-pie:-dynamic-linker /lib/ld-musl-x86_64.so.1}")  # fmt: skip
    musl = dist / "musl"
    (musl / "bin").mkdir(parents=True)
    (musl / "musl-gcc.specs").write_text(specs)
    wrapper = musl / "bin" / "musl-gcc"
    gcc = '"${REALGCC:-x86_64-linux-gnu-gcc}"'  # as Debian's /usr/bin/musl-gcc, with the patched specs
    wrapper.write_text(f'#!/bin/sh\nexec {gcc} "$@" -specs "{musl}/musl-gcc.specs"\n')
    wrapper.chmod(0o755)
    for stamp in ("makeself", "linux-headers", "musl"):
        (deps / stamp / ".stamp").touch()


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
