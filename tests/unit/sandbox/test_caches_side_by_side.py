"""sandbox up builds the node images and the package mirror side by side, and a failure of either stops it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gpuprov.errors import EnvironmentProblem
from gpuprov.sandbox import cluster, docker, images, mirror

WAIT_S = 5.0
CONTENT = mirror.MirrorContent(root=Path("/cache/mirror/abc"), key_fingerprint="F" * 40)


@pytest.fixture(autouse=True)
def no_images_yet(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No Docker engine is asked anything; no image exists; the build host check is recorded."""
    checked: list[str] = []
    monkeypatch.setattr(docker, "ensure_engine", lambda: None)
    monkeypatch.setattr(docker, "image_exists", lambda ref: False)
    monkeypatch.setattr(images, "_check_build_host", lambda: checked.append("checked"))
    return checked


def test_the_image_build_runs_while_the_mirror_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    mirror_started = threading.Event()
    image_started = threading.Event()

    def build_image(name: str) -> str:
        image_started.set()
        # Returns only once the mirror build is under way: run one after the other, this would time out.
        assert mirror_started.wait(WAIT_S), "the mirror build did not start while the image was building"
        return f"gpuprov/node:{name}-hash"

    def build_mirror() -> mirror.MirrorContent:
        mirror_started.set()
        assert image_started.wait(WAIT_S), "the image build did not start while the mirror was building"
        return CONTENT

    monkeypatch.setattr(images, "ensure_image", build_image)
    monkeypatch.setattr(mirror, "ensure_mirror_content", build_mirror)

    refs, got = cluster._ensure_caches(["debian12", "rocky9"])

    assert refs == {"debian12": "gpuprov/node:debian12-hash", "rocky9": "gpuprov/node:rocky9-hash"}
    assert got is CONTENT


def test_the_images_are_built_in_the_main_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the main thread stops the image build's own sessions on Ctrl-C (images._run_logged).
    threads: list[threading.Thread] = []

    def build_image(name: str) -> str:
        threads.append(threading.current_thread())
        return f"gpuprov/node:{name}-hash"

    monkeypatch.setattr(images, "ensure_image", build_image)
    monkeypatch.setattr(mirror, "ensure_mirror_content", lambda: CONTENT)

    cluster._ensure_caches(["debian12"])

    assert threads == [threading.main_thread()]


def test_a_machine_that_cannot_build_images_is_refused_before_the_mirror_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []

    def cannot_build() -> None:
        raise EnvironmentProblem("building sandbox images needs root (debootstrap and chroot); run as root")

    def build_mirror() -> mirror.MirrorContent:
        started.append("mirror")
        return CONTENT

    monkeypatch.setattr(images, "_check_build_host", cannot_build)
    monkeypatch.setattr(mirror, "ensure_mirror_content", build_mirror)

    with pytest.raises(EnvironmentProblem, match="needs root"):
        cluster._ensure_caches(["debian12"])
    assert started == []


def test_with_every_image_there_the_build_host_is_not_checked(
    monkeypatch: pytest.MonkeyPatch, no_images_yet: list[str]
) -> None:
    monkeypatch.setattr(docker, "image_exists", lambda ref: True)
    monkeypatch.setattr(images, "ensure_image", lambda name: f"gpuprov/node:{name}-hash")
    monkeypatch.setattr(mirror, "ensure_mirror_content", lambda: CONTENT)

    cluster._ensure_caches(["debian12"])

    assert no_images_yet == []


def test_a_failed_image_build_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def build_image(name: str) -> str:
        raise EnvironmentProblem("debootstrap could not install Debian bookworm")

    monkeypatch.setattr(images, "ensure_image", build_image)
    monkeypatch.setattr(mirror, "ensure_mirror_content", lambda: CONTENT)

    with pytest.raises(EnvironmentProblem, match="debootstrap"):
        cluster._ensure_caches(["debian12"])


def test_a_failed_mirror_build_is_raised_and_leaves_no_build_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads_before = threading.active_count()

    def build_mirror() -> mirror.MirrorContent:
        raise mirror.MirrorBuildError("dpkg-deb failed")

    monkeypatch.setattr(images, "ensure_image", lambda name: f"gpuprov/node:{name}-hash")
    monkeypatch.setattr(mirror, "ensure_mirror_content", build_mirror)

    with pytest.raises(mirror.MirrorBuildError, match="dpkg-deb"):
        cluster._ensure_caches(["debian12"])
    assert threading.active_count() == threads_before
