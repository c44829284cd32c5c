"""The mirror cache: a second call is a hit, an interrupted build leaves nothing half made, and only the
newest mirrors are kept."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from gpuprov.sandbox import mirror
from gpuprov.sandbox.mirror import MirrorContent
from gpuprov.sandbox.standins import CATALOGUE
from tests.local.sandbox.mirror.helpers import (
    SMALL,
    needs_build_tools,
    repo,
)

pytestmark = needs_build_tools


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


def _cache_with_key(cache: Path, tmp_path: Path) -> Path:
    """A fresh cache that reuses the shared cache's signing key (generating one costs a few seconds)."""
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
def test_only_the_newest_mirrors_are_kept(built: MirrorContent, cache: Path, tmp_path: Path) -> None:
    """Two finished mirrors in the cache, an hour and a minute old (hard-linked copies of the shared one, so
    one build here instead of three): the next build keeps itself and the newer of the two (KEEP_MIRRORS)."""
    fresh = _cache_with_key(cache, tmp_path)
    now = time.time()
    older = []
    for name, age in (("00000000000a", 3600), ("00000000000b", 60)):
        copy = fresh / "mirror" / name
        shutil.copytree(built.root, copy, copy_function=os.link)
        os.utime(copy, (now - age, now - age))
        older.append(copy)
    newest = mirror.ensure_content(SMALL, None, cache=fresh).root
    assert mirror.KEEP_MIRRORS == 2
    assert [r.is_dir() for r in (*older, newest)] == [False, True, True]
