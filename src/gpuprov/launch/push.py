"""Push the script and --workdir to each host's job directory over SFTP.

Files go to a content-addressed store on the host (~/.gpuprov/files/<sha256>) and are hard-linked into
the job's work directory, so a re-launch sends only the files that changed. The workdir is sent without
.git (and other VCS directories) and without files over --max-file-mb unless --include-large is given.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

import paramiko

from gpuprov.errors import GpuprovError
from gpuprov.launch import remote

STORE_DIR = ".gpuprov/files"
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".venv"})


@dataclass(frozen=True)
class LocalFile:
    rel: str  # path in the job's work directory, '/'-separated
    path: Path
    sha256: str
    size: int
    executable: bool


@dataclass(frozen=True)
class Payload:
    files: list[LocalFile]
    script_rel: str
    skipped_large: list[str]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class PushStats:
    sent: int
    sent_bytes: int
    unchanged: int


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _local(rel: str, path: Path) -> LocalFile:
    info = path.stat()
    return LocalFile(rel, path, _sha256(path), info.st_size, bool(info.st_mode & stat.S_IXUSR))


def collect(script: Path, workdir: Path | None, include_large: bool, max_file_mb: int) -> Payload:
    """The files a job needs: the workdir's tree (filtered) and the script."""
    files: dict[str, LocalFile] = {}
    skipped: list[str] = []
    limit = max_file_mb * 1024 * 1024
    script_rel = script.name
    if workdir is not None:
        for root, dirs, names in os.walk(workdir):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(names):
                path = Path(root) / name
                if not path.is_file():
                    continue
                rel = path.relative_to(workdir).as_posix()
                if path.stat().st_size > limit and not include_large and path != script:
                    skipped.append(rel)
                    continue
                files[rel] = _local(rel, path)
        if script.is_relative_to(workdir):
            script_rel = script.relative_to(workdir).as_posix()
    if script_rel not in files:
        files[script_rel] = _local(script_rel, script)
    return Payload(sorted(files.values(), key=lambda f: f.rel), script_rel, skipped)


def _sftp_error(host: str, exc: Exception) -> GpuprovError:
    return GpuprovError(f"{host}: copying the job's files failed: {exc}")


def push(
    host: str,
    client: paramiko.SSHClient,
    job_dir: str,
    payload: Payload,
    extra: dict[str, bytes],
) -> PushStats:
    """Create job_dir (relative to home) on the host with work/ filled from payload and the extra files."""
    setup = remote.run(client, f'mkdir -p "$HOME/{STORE_DIR}" "$HOME/{job_dir}/work" "$HOME/{job_dir}/ranks"')
    if setup.rc != 0:
        raise GpuprovError(f"{host}: cannot create ~/{job_dir}: {setup.last_line}")
    sent = sent_bytes = 0
    try:
        with client.open_sftp() as sftp:
            home = sftp.normalize(".")
            store = f"{home}/{STORE_DIR}"
            present = set(sftp.listdir(store))
            for item in {f.sha256: f for f in payload.files}.values():
                if item.sha256 in present:
                    continue
                tmp = f"{store}/.{item.sha256}.{uuid.uuid4().hex[:8]}"
                sftp.put(str(item.path), tmp, confirm=True)
                sftp.chmod(tmp, 0o755 if item.executable else 0o644)
                sftp.posix_rename(tmp, f"{store}/{item.sha256}")
                sent += 1
                sent_bytes += item.size
            for name, data in extra.items():
                with sftp.open(f"{home}/{job_dir}/{name}", "wb") as f:
                    f.write(data)
    except (OSError, paramiko.SSHException) as exc:
        raise _sftp_error(host, exc) from None
    # Hard links (not symlinks: Python puts a script's real directory on sys.path).
    lines = ["set -e", f'cd "$HOME/{job_dir}/work"']
    dirs = sorted({str(Path(f.rel).parent) for f in payload.files} - {"."})
    if dirs:
        lines.append("mkdir -p " + " ".join(shlex.quote(d) for d in dirs))
    lines += [f'ln -f "$HOME/{STORE_DIR}/{f.sha256}" {shlex.quote(f.rel)}' for f in payload.files]
    linked = remote.run(client, "sh -s", stdin=("\n".join(lines) + "\n").encode())
    if linked.rc != 0:
        raise GpuprovError(
            f"{host}: linking the job's files into ~/{job_dir}/work failed: {linked.last_line}"
        )
    unchanged = len({f.sha256 for f in payload.files}) - sent
    return PushStats(sent, sent_bytes, unchanged)
