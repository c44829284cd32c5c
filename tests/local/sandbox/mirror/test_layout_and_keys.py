"""The mirror's layout (NVIDIA's repository paths) and its signing key: published, its private part kept
out of the served root, named as a stand-in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuprov.sandbox import mirror
from gpuprov.sandbox.mirror import APT_REPOS, RPM_REPOS, MirrorContent
from tests.local.sandbox.mirror.helpers import (
    needs_build_tools,
    repo,
    run,
)

pytestmark = needs_build_tools


@pytest.mark.integration
def test_layout_mimics_nvidia_repositories(built: MirrorContent) -> None:
    assert re.fullmatch(r"[0-9A-F]{40}", built.key_fingerprint)
    assert built.key_file_name == built.key_fingerprint[-8:].lower() + ".pub"
    for name in APT_REPOS:
        for f in ("Packages", "Packages.gz", "Release", "Release.gpg", "InRelease", built.key_file_name):
            assert (repo(built, name) / f).is_file(), f"{name}/{f}"
    for name in RPM_REPOS:
        for f in ("repodata/repomd.xml", "repodata/repomd.xml.asc", built.key_file_name):
            assert (repo(built, name) / f).is_file(), f"{name}/{f}"
    assert (built.root / "keys" / "gpuprov-sandbox.asc").read_text().startswith("-----BEGIN PGP PUBLIC KEY")


@pytest.mark.integration
def test_private_key_stays_out_of_the_served_root(built: MirrorContent, cache: Path) -> None:
    assert (cache / "mirror-key").stat().st_mode & 0o777 == 0o700
    assert not list(built.root.rglob("private-keys-v1.d"))
    for f in built.root.rglob("*"):
        if f.is_file() and f.suffix in {".asc", ".pub", ".gpg", ""}:
            assert b"PRIVATE KEY" not in f.read_bytes(), f


@pytest.mark.integration
def test_key_uid_says_it_is_a_stand_in(built: MirrorContent) -> None:
    shown = run(
        "gpg",
        "--batch",
        "--with-colons",
        "--import-options",
        "show-only",
        "--import",
        built.root / mirror.KEY_FILE,
    ).stdout
    assert "gpuprov sandbox mirror (stand-in for NVIDIA CUDA repository)" in shown
    assert f"fpr:::::::::{built.key_fingerprint}:" in shown
