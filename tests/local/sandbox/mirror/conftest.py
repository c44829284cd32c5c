"""The sandbox mirror, built once for all the tests here with the real tools (dpkg-deb, apt-ftparchive,
rpmbuild, gpg); it leaves out the PyPI index (wheels=None) to stay quick (test_torch_wheels.py builds it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov.sandbox import mirror
from gpuprov.sandbox.mirror import MirrorContent
from gpuprov.sandbox.standins import CATALOGUE
from tests.local.sandbox.mirror.helpers import serve


@pytest.fixture(scope="package")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="package")
def built(cache: Path) -> MirrorContent:
    return mirror.ensure_content(CATALOGUE, None, cache=cache)


@pytest.fixture(scope="package")
def keyring(built: MirrorContent, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published key as a binary keyring, which gpgv and apt's signed-by read."""
    path = tmp_path_factory.mktemp("keyring") / "gpuprov-sandbox.gpg"
    armored = (built.root / mirror.KEY_FILE).read_bytes()
    subprocess.run(["gpg", "--batch", "--dearmor", "-o", str(path)], input=armored, check=True)
    return path


@pytest.fixture(scope="package")
def served(built: MirrorContent) -> Iterator[str]:
    """The mirror over plain HTTP on loopback, as the sandbox's mirror container serves it."""
    with serve(built.root) as url:
        yield url
