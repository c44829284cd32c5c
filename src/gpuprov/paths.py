"""Where gpuprov keeps state (per sandbox, per run) and caches (built images, mirror content)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from gpuprov.errors import BadInput, EnvironmentProblem


def _xdg(var: str, fallback: str) -> tuple[Path, str]:
    value = os.environ.get(var)
    return (Path(value), var) if value else (Path.home() / fallback, "HOME")


def state_dir() -> Path:
    """Things that belong to a user's sandboxes and runs; GPUPROV_STATE_DIR overrides."""
    override = os.environ.get("GPUPROV_STATE_DIR")
    if override:
        return _usable(Path(override), "GPUPROV_STATE_DIR")
    base, source = _xdg("XDG_STATE_HOME", ".local/state")
    return _usable(base / "gpuprov", source)


def writable_state_dir(verb: str, need_mb: int, need_files: int = 0, why: str = "") -> Path:
    """The state dir, once a file could be written there (or, while it does not exist yet, in the directory
    it will be made in) and `need_mb` MB and `need_files` inodes are free there: what `verb` writes (run
    directories, job records, results) must not fail after it touched a host. `why` follows the need in the
    message (" for 64 host(s)"). Nothing is left behind. EnvironmentProblem (exit 3), one line, when it
    cannot be written or has too little room."""
    path = state_dir()
    where = nearest_existing(path)  # state_dir() checked it is a directory, not a file
    try:
        found = probe_write(where)
    except OSError as exc:
        raise EnvironmentProblem(
            f"{verb}: the state dir {path} cannot be written ({exc.strerror or exc}); point "
            "GPUPROV_STATE_DIR at a writable directory"
        ) from None
    free_mb = found.f_bavail * found.f_frsize // 2**20
    if free_mb < need_mb:
        raise EnvironmentProblem(
            f"{verb}: the state dir {path} has {free_mb} MB free, {verb} needs {need_mb} MB{why}; free some "
            "room or point GPUPROV_STATE_DIR at another disk"
        )
    # f_files is 0 where the file system has no inode table to run out of (btrfs): nothing to count then.
    if found.f_files and found.f_favail < need_files:
        raise EnvironmentProblem(
            f"{verb}: the state dir {path} has room for {found.f_favail} more files (inodes), {verb} needs "
            f"{need_files}{why}; remove files there or point GPUPROV_STATE_DIR at another disk"
        )
    return path


def nearest_existing(path: Path) -> Path:
    """path, or the nearest directory above it that exists (where `mkdir -p path` would begin)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def probe_write(directory: Path) -> os.statvfs_result:
    """Write a file in directory and remove it; its file system's figures. OSError when that fails: a
    file really written, because root passes os.access on a read-only mount or on sysfs."""
    fd, probe = tempfile.mkstemp(prefix=".gpuprov-write-test-", dir=directory)
    os.close(fd)
    os.unlink(probe)
    return os.statvfs(directory)


def cache_dir() -> Path:
    """Things that can be rebuilt at any time (mirror content); GPUPROV_CACHE_DIR overrides."""
    override = os.environ.get("GPUPROV_CACHE_DIR")
    if override:
        return _usable(Path(override), "GPUPROV_CACHE_DIR")
    base, source = _xdg("XDG_CACHE_HOME", ".cache")
    return _usable(base / "gpuprov", source)


def _usable(path: Path, source: str) -> Path:
    """path, when it is a directory or can be made one (it is created when first written to)."""
    if not str(path).strip():  # a variable of blanks would name a directory of blanks in the cwd
        raise BadInput(f"{source} is blank; point it at a directory, or unset it for the default")
    what = f"{source}={path}" if source.startswith(("GPUPROV_", "XDG_")) else str(path)
    probe = path
    try:
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        if not probe.is_dir():
            raise BadInput(
                f"{what}: {probe} is a file, not a directory; point {source} at a directory "
                "(gpuprov creates it when missing)"
            )
    except OSError as exc:  # a name too long, a loop of links
        raise BadInput(f"{what}: {exc.strerror or exc}; point {source} at a directory") from None
    return path


def write_private_json(path: Path, data: Any, **dump: Any) -> None:
    """Replace path with data as JSON in one step: the file 0600 (mkstemp's), its folder 0700 when made here,
    never half a file and no temporary one left behind. OSError (or json's TypeError/ValueError) when it
    cannot; `dump` goes to json.dump (sort_keys, default)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, **dump)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
