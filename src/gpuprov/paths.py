"""Where gpuprov keeps state (per sandbox, per run) and caches (built images, mirror content)."""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def state_dir() -> Path:
    """Things that belong to a user's sandboxes and runs; GPUPROV_STATE_DIR overrides."""
    override = os.environ.get("GPUPROV_STATE_DIR")
    return Path(override) if override else _xdg("XDG_STATE_HOME", ".local/state") / "gpuprov"


def cache_dir() -> Path:
    """Things that can be rebuilt at any time (mirror content); GPUPROV_CACHE_DIR overrides."""
    override = os.environ.get("GPUPROV_CACHE_DIR")
    return Path(override) if override else _xdg("XDG_CACHE_HOME", ".cache") / "gpuprov"
