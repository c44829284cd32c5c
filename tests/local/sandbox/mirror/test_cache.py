"""The mirror cache: a second call is a hit, an interrupted build leaves nothing half made, and only the
newest mirrors are kept."""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import pytest

from gpuprov.sandbox import mirror
from gpuprov.sandbox.mirror import MirrorContent
from gpuprov.sandbox.standins import CATALOGUE, ContainerToolkitRelease
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
def test_only_the_newest_mirrors_are_kept(cache: Path, tmp_path: Path) -> None:
    fresh = _cache_with_key(cache, tmp_path)
    roots = []
    for patch in range(3):
        catalogue = dataclasses.replace(SMALL, container_toolkit=(ContainerToolkitRelease(f"1.17.{patch}"),))
        roots.append(mirror.ensure_content(catalogue, None, cache=fresh).root)
    assert [r.is_dir() for r in roots] == [False, True, True]
