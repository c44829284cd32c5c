"""Where gpuprov keeps state (per sandbox, per run) and caches (built images, mirror content)."""

from __future__ import annotations

import os
from pathlib import Path

from gpuprov.errors import BadInput


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


def cache_dir() -> Path:
    """Things that can be rebuilt at any time (mirror content); GPUPROV_CACHE_DIR overrides."""
    override = os.environ.get("GPUPROV_CACHE_DIR")
    if override:
        return _usable(Path(override), "GPUPROV_CACHE_DIR")
    base, source = _xdg("XDG_CACHE_HOME", ".cache")
    return _usable(base / "gpuprov", source)


def _usable(path: Path, source: str) -> Path:
    """path, when it is a directory or can be made one (it is created when first written to)."""
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
