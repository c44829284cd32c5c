"""Local images for what the sandbox serves beside its test hosts: the image registry and the PyTorch image.

Each is the debootstrapped Debian 12 rootfs that the node images start from (gpuprov.sandbox.images, cached
as one tarball) plus a few steps, imported with `docker import`, built under the same machine-wide build
lock, and tagged with a hash of everything that shapes it, so a machine builds each once and reuses it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from gpuprov import console, paths
from gpuprov.sandbox import docker, images

# Bump when a change to the build is not visible in this file's text (it is hashed too) yet must rebuild.
RECIPE_VERSION = 1
REPOSITORY_PREFIX = "gpuprov/"
LABEL_SERVICE = "gpuprov.service-image"
INPUTS_DIR = "/tmp/gpuprov-inputs"  # where `inputs` are copied in the rootfs; removed before the import


@dataclass(frozen=True)
class ServiceImage:
    """How to make one image from the base rootfs."""

    name: str  # the repository is gpuprov/<name>
    packages: tuple[str, ...] = ()  # from Debian's archive, as the node images' extra packages
    inputs: tuple[Path, ...] = ()  # files copied into INPUTS_DIR for `commands` (hashed by name and size)
    commands: tuple[tuple[str, ...], ...] = ()  # run in the rootfs (chroot) after the packages
    files: tuple[tuple[str, str], ...] = ()  # (path, content) written into the rootfs
    changes: tuple[str, ...] = ()  # Dockerfile instructions for `docker import --change` (CMD, ENV)


def ensure(spec: ServiceImage) -> str:
    """The local ref of spec's image (gpuprov/<name>:<12 hex>), built only when no image has that hash."""
    ref = f"{REPOSITORY_PREFIX}{spec.name}:{image_hash(spec)}"
    docker.ensure_engine()
    if docker.image_exists(ref):
        return ref
    with images._build_lock():
        if not docker.image_exists(ref):  # another gpuprov may have built it while we waited
            _build(spec, ref)
    return ref


def image_hash(spec: ServiceImage) -> str:
    """The base rootfs, the recipe, its inputs (name and size: they are versioned wheels) and this file."""
    fields = dataclasses.asdict(spec)
    fields["inputs"] = [(path.name, path.stat().st_size) for path in spec.inputs]
    text = json.dumps(
        ["service", RECIPE_VERSION, images.base_hash(), fields, Path(__file__).read_text()],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _build(spec: ServiceImage, ref: str) -> None:
    images._check_build_host()
    started = time.monotonic()
    console.step(f"Building sandbox image {spec.name} (first time only)")
    log_path = paths.cache_dir() / "logs" / f"image-{spec.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log, images._scratch_dir() as work:
        rootfs = work / "rootfs"
        if images.base_tarball().is_file():
            images._unpack(images.base_tarball(), rootfs, log, log_path)
        else:
            images._debootstrap(rootfs, log, log_path)
            images._save_base_tarball(rootfs, log, log_path)
        if spec.packages:
            images._install_packages(rootfs, spec.packages, log, log_path)
        images._strip_build_state(rootfs)
        inputs = images._inside(rootfs, INPUTS_DIR)
        inputs.mkdir(parents=True)
        for path in spec.inputs:
            shutil.copyfile(path, inputs / path.name)
        for command in spec.commands:
            images._chroot(rootfs, list(command), log, log_path)
        shutil.rmtree(inputs)
        for target, content in spec.files:
            images._write(rootfs, target, content)
        _import(rootfs, spec, ref, log_path)
    _remove_stale(spec.name, ref)
    console.success(f"Built sandbox image {ref} in {time.monotonic() - started:.0f} s")


def _import(rootfs: Path, spec: ServiceImage, ref: str, log_path: Path) -> None:
    """`tar | docker import` as one pipeline that fails when either side does (pipefail), logged."""
    changes = [*spec.changes, f'LABEL {LABEL_SERVICE}="{spec.name}"']
    options = [arg for c in changes for arg in ("--change", c)]
    pipeline = 'set -o pipefail; tar -C "$1" --numeric-owner -c . | docker import "${@:3}" - "$2"'
    with open(log_path, "a") as log:
        status = images._run_logged(["bash", "-c", pipeline, "import", str(rootfs), ref, *options], log)
    if status != 0:
        raise docker.DockerError(f"'docker import' of sandbox image {ref} failed; see {log_path}")


def _remove_stale(name: str, keep: str) -> None:
    """Older builds of this image go; ones that containers still use stay (docker refuses to remove them)."""
    listed = docker.run(
        "image", "ls", "--filter", f"label={LABEL_SERVICE}={name}", "--format", "{{.Repository}}:{{.Tag}}",
        check=False,
    )  # fmt: skip
    for ref in listed.stdout.split():
        if ref != keep and ref.startswith(REPOSITORY_PREFIX):
            docker.run("image", "rm", ref, check=False)
