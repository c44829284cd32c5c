"""sandbox up builds the node images and the package mirror side by side, and a failure of either stops it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gpuprov.errors import EnvironmentProblem
from gpuprov.sandbox import cluster, images, mirror

WAIT_S = 5.0


def test_the_image_build_runs_while_the_mirror_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    mirror_started = threading.Event()
    image_started = threading.Event()
    content = mirror.MirrorContent(root=Path("/cache/mirror/abc"), key_fingerprint="F" * 40)

    def build_image(name: str) -> str:
        image_started.set()
        # Returns only once the mirror build is under way: run one after the other, this would time out.
        assert mirror_started.wait(WAIT_S), "the mirror build did not start while the image was building"
        return f"gpuprov/node:{name}-hash"

    def build_mirror() -> mirror.MirrorContent:
        mirror_started.set()
        assert image_started.wait(WAIT_S), "the image build did not start while the mirror was building"
        return content

    monkeypatch.setattr(images, "ensure_image", build_image)
    monkeypatch.setattr(mirror, "ensure_mirror_content", build_mirror)

    refs, got = cluster._ensure_caches(["debian12", "rocky9"])

    assert refs == {"debian12": "gpuprov/node:debian12-hash", "rocky9": "gpuprov/node:rocky9-hash"}
    assert got is content


def test_a_failed_image_build_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def build_image(name: str) -> str:
        raise EnvironmentProblem("debootstrap could not install Debian bookworm")

    content = mirror.MirrorContent(root=Path("/cache/mirror/abc"), key_fingerprint="F" * 40)
    monkeypatch.setattr(images, "ensure_image", build_image)
    monkeypatch.setattr(mirror, "ensure_mirror_content", lambda: content)

    with pytest.raises(EnvironmentProblem, match="debootstrap"):
        cluster._ensure_caches(["debian12"])


def test_a_failed_mirror_build_is_raised_and_leaves_no_build_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads_before = threading.active_count()

    def build_image(name: str) -> str:
        return f"gpuprov/node:{name}-hash"

    def build_mirror() -> mirror.MirrorContent:
        raise mirror.MirrorBuildError("dpkg-deb failed")

    monkeypatch.setattr(images, "ensure_image", build_image)
    monkeypatch.setattr(mirror, "ensure_mirror_content", build_mirror)

    with pytest.raises(mirror.MirrorBuildError, match="dpkg-deb"):
        cluster._ensure_caches(["debian12"])
    # An image build that began runs to its end (its cache is written atomically) before up stops.
    assert threading.active_count() == threads_before
