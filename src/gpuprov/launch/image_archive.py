"""Where `--push-image` takes the image from on the controller: its engine, or an archive file the user names.

From the engine (`docker`, else `podman`, on PATH): the reference must resolve there (`ENGINE image
inspect REF`; a reference pinned by digest resolves only where that manifest digest is known, e.g. after
`docker pull REF@sha256:...`), and is saved ONCE, with `ENGINE save -o FILE REF`, into a private temporary
folder (TMPDIR, else /tmp) that is removed afterwards in every case, and only when some host lacks the
image. From a file: an uncompressed `docker save`/`podman save` archive (docker-archive format), used in
place.

What identifies the image everywhere is its image ID: the sha256 of its config JSON (OCI image spec,
"ImageID"). It is the `Config` entry of the archive's manifest.json, and what Docker's classic store and
Podman report as `.Id`; the registry's manifest digest (RepoDigests) is not kept by `docker save`
(moby/moby#22011), so it cannot be compared after a push.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuprov import interrupts
from gpuprov.errors import BadInput, EnvironmentProblem, GpuprovError

ENGINES = ("docker", "podman")  # the controller's engine: the first on PATH
MISSING = ("no such image", "image not known")  # docker 20.10, podman 4.3 (tests/recorded/container-engines)
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Archive:
    """The archive as it is sent: its file, size and sha256 (the host checks both)."""

    path: Path
    size: int
    sha256: str


@dataclass(frozen=True)
class Source:
    """The image to push: its reference, its image ID, and where its archive comes from."""

    reference: str
    image_id: str  # sha256:<hex>, the config digest
    engine: str | None  # the controller's engine that saves it, or None: the archive file
    file: Path | None = None

    @contextlib.contextmanager
    def archive(self) -> Iterator[Archive]:
        """The archive, made once (the engine's save into a private folder, removed afterwards)."""
        if self.file is not None:
            yield Archive(self.file, self.file.stat().st_size, _sha256(self.file))
            return
        assert self.engine is not None
        folder = Path(tempfile.mkdtemp(prefix="gpuprov-push-"))
        try:
            path = folder / "image.tar"
            _save(self.engine, self.reference, path)
            saved_id = archive_image_id(path)
            if saved_id != self.image_id:  # e.g. the tag moved between inspect and save
                raise GpuprovError(
                    f"{self.engine} saved {saved_id} for {self.reference}, not {self.image_id}; rerun"
                )
            yield Archive(path, path.stat().st_size, _sha256(path))
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def source(reference: str, file: Path | None = None) -> Source:
    """The image from the archive file, else from the controller's engine; BadInput when it is not there."""
    if file is not None:
        if not file.is_file():
            raise BadInput(f"image push: the archive {file} is not a file; give a `docker save` archive")
        return Source(reference, archive_image_id(file), None, file)
    engine = next((e for e in ENGINES if shutil.which(e)), None)
    if engine is None:
        raise EnvironmentProblem(
            f"image push: neither docker nor podman is on this machine to save {reference} from; "
            "install one and load the image into it, or give the image as an archive file"
        )
    return Source(reference, resolve(engine, reference), engine)


def resolve(engine: str, reference: str) -> str:
    """The image ID the controller's engine has for reference."""
    proc = _engine(engine, "image", "inspect", "--format", "{{.Id}}", reference)
    if proc.returncode != 0:
        why = _last_line(proc)
        if any(word in why.lower() for word in MISSING):
            raise BadInput(
                f"image push: {reference} is not in this machine's {engine} ({why}); pull or load it "
                "here first (a reference by digest must be the one the engine recorded), then rerun; "
                "nothing was sent"
            )
        raise EnvironmentProblem(f"image push: {engine} image inspect {reference} failed: {why}")
    return "sha256:" + proc.stdout.strip().removeprefix("sha256:")


def archive_image_id(path: Path) -> str:
    """The image ID (config digest) in a docker-archive's manifest.json; BadInput for anything else."""
    try:
        with tarfile.open(path, "r:") as tar:  # uncompressed: Podman 4.3's load refuses gzip from stdin
            member = tar.extractfile("manifest.json")
            manifest = json.load(member) if member is not None else None
    except (OSError, KeyError, tarfile.TarError, ValueError) as exc:
        raise BadInput(
            f"image push: {path} is not an uncompressed docker-archive (`docker save IMAGE > FILE`) "
            f"with a manifest.json ({exc}); make one with docker save or podman save"
        ) from None
    if not isinstance(manifest, list) or len(manifest) != 1 or not isinstance(manifest[0], dict):
        raise BadInput(f"image push: {path} must hold exactly one image (its manifest.json lists more)")
    config = str(manifest[0].get("Config", ""))
    found = _HEX.search(config.rsplit("/", 1)[-1])  # "<hex>.json", or "blobs/sha256/<hex>" (Docker 25+)
    if found is None:
        raise BadInput(f"image push: {path}: manifest.json names no config digest ({config!r})")
    return "sha256:" + found[0]


def _save(engine: str, reference: str, path: Path) -> None:
    proc = _engine(engine, "save", "-o", str(path), reference)
    if proc.returncode == 0:
        return
    if interrupts.requested():  # Ctrl-C reached the engine's save too
        raise KeyboardInterrupt
    why = _last_line(proc)
    if "no space left" in why.lower():
        raise EnvironmentProblem(
            f"image push: no room to save {reference} in {path.parent} ({why}); free room there or set "
            "TMPDIR to a folder with room; nothing was sent"
        )
    raise GpuprovError(f"image push: {engine} save {reference} failed: {why}; nothing was sent")


def _engine(engine: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([engine, *args], capture_output=True, text=True, check=False)


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    return lines[-1].strip() if lines else f"exit status {proc.returncode}"


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
