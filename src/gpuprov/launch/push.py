"""Push the script and --workdir to each host's job directory over SFTP.

Files go to a content-addressed store on the host (~/.gpuprov/files/<sha256>) and are hard-linked into
the job's work directory, so a re-launch sends only the files that changed. The workdir is sent without
.git (and other VCS directories) and without files over --max-file-mb unless --include-large is given.

Only regular files inside the workdir are pushed: a symlink is followed only when it ends at a regular file
inside the workdir (pushed as a copy of that file); one that leads outside it (to /etc/shadow, to
~/.ssh), dangles, or names a directory is skipped and listed. On the hosts, ~/.gpuprov and everything in
it are private to the user (0700 directories, 0600 files): run.sh carries the job's --env values.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from gpuprov import ssh
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
    skipped_links: list[str] = field(default_factory=list)  # symlinks not followed (see the docstring)

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


def _inside(path: Path, workdir: Path) -> Path | None:
    """The regular file a workdir entry stands for, if it is one inside the workdir (links resolved)."""
    if not path.is_symlink():
        return path if stat.S_ISREG(path.lstat().st_mode) else None
    target = path.resolve()
    if target.is_relative_to(workdir) and target.is_file() and not target.is_symlink():
        return target
    return None


def collect(script: Path, workdir: Path | None, include_large: bool, max_file_mb: int) -> Payload:
    """The files a job needs: the workdir's tree (filtered) and the script. workdir is resolved."""
    files: dict[str, LocalFile] = {}
    skipped: list[str] = []
    links: list[str] = []
    limit = max_file_mb * 1024 * 1024
    script_rel = script.name
    if workdir is not None:
        for root, dirs, names in os.walk(workdir):  # does not descend into symlinked directories
            here = Path(root)
            links += [(here / d).relative_to(workdir).as_posix() for d in dirs if (here / d).is_symlink()]
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (here / d).is_symlink())
            for name in sorted(names):
                entry = here / name
                rel = entry.relative_to(workdir).as_posix()
                path = _inside(entry, workdir)
                if path is None:
                    if entry.is_symlink():
                        links.append(rel)
                    continue  # sockets, fifos, devices: not files to push
                if path.stat().st_size > limit and not include_large and path != script:
                    skipped.append(rel)
                    continue
                files[rel] = _local(rel, path)
        if script.is_relative_to(workdir):
            script_rel = script.relative_to(workdir).as_posix()
    if script_rel not in files:
        files[script_rel] = _local(script_rel, script)
    return Payload(sorted(files.values(), key=lambda f: f.rel), script_rel, skipped, sorted(links))


def setup_command(job_dir: str) -> str:
    """Make the store and the job's directories on the host, all private to the user (old ones too)."""
    private = [".gpuprov", STORE_DIR, remote.JOBS_DIR, job_dir]
    made = [STORE_DIR, f"{job_dir}/work", f"{job_dir}/ranks"]
    return (
        f"umask 077 && mkdir -p {' '.join(remote.home_path(d) for d in made)} && "
        f"chmod 700 {' '.join(remote.home_path(d) for d in private)}"
    )


def link_script(job_dir: str, files: list[LocalFile]) -> str:
    """The shell script that hard-links the stored files into the job's work directory."""
    # Hard links (not symlinks: Python puts a script's real directory on sys.path).
    lines = ["set -e", "umask 077", f"cd {remote.home_path(f'{job_dir}/work')}"]
    dirs = sorted({str(Path(f.rel).parent) for f in files} - {"."})
    if dirs:
        lines.append("mkdir -p -- " + " ".join(shlex.quote(d) for d in dirs))
    stored = {f.sha256: remote.home_path(f"{STORE_DIR}/{f.sha256}") for f in files}
    lines += [f"ln -f -- {stored[f.sha256]} {shlex.quote(f.rel)}" for f in files]
    return "\n".join(lines) + "\n"


def push(
    host: str,
    client: paramiko.SSHClient,
    job_dir: str,
    payload: Payload,
    extra: dict[str, bytes],
) -> PushStats:
    """Create job_dir (relative to home) on the host with work/ filled from payload and the extra files."""
    setup = ssh.run(client, setup_command(job_dir))
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
                # The store is already 0700 (setup_command): nobody else sees the file while it is copied.
                ssh.put(sftp, item.path, f"{store}/{item.sha256}", 0o700 if item.executable else 0o600)
                sent += 1
                sent_bytes += item.size
            for name, data in extra.items():
                ssh.put_bytes(sftp, data, f"{home}/{job_dir}/{name}", 0o600)  # run.sh carries the job's env
    except ssh.SessionLost as exc:
        raise GpuprovError(f"{host}: copying the job's files failed: {exc.cause}") from None
    except (OSError, paramiko.SSHException) as exc:
        raise GpuprovError(f"{host}: copying the job's files failed: {exc}") from None
    linked = ssh.run(client, "sh -s", stdin=link_script(job_dir, payload.files).encode())
    if linked.rc != 0:
        raise GpuprovError(
            f"{host}: linking the job's files into ~/{job_dir}/work failed: {linked.last_line}"
        )
    unchanged = len({f.sha256 for f in payload.files}) - sent
    return PushStats(sent, sent_bytes, unchanged)
