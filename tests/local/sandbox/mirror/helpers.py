"""What the tests of a built sandbox mirror share: its build tools, a small catalogue, serving it over HTTP,
and reading its repositories and packages."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov.sandbox.mirror import MirrorContent
from gpuprov.sandbox.standins import CATALOGUE

TOOLS = ("dpkg-deb", "apt-ftparchive", "rpmbuild", "rpmsign", "createrepo_c", "gpg", "gpgv")
# Tests that build a mirror with the real tools (every one that uses the `built` or `cache` fixture) are
# marked integration: the build takes half a minute or more, which `-m "not integration"` leaves out.
needs_build_tools = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS) and os.geteuid() != 0,
    reason="needs the mirror's build tools (installed automatically only as root)",
)

SMALL = dataclasses.replace(
    CATALOGUE, drivers=(), cuda=(), cudnn=(), nccl=(), dcgm=(), container_toolkit=CATALOGUE.container_toolkit
)


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def repo(content: MirrorContent, name: str) -> Path:
    return content.root / "cuda" / "repos" / name / "x86_64"


def run(*cmd: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]


def extract(deb: Path, into: Path) -> Path:
    subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True)
    return into


def paragraphs(packages_file: Path) -> list[dict[str, str]]:
    result = []
    for block in packages_file.read_text().strip().split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): (.*)$", block, re.MULTILINE))
        result.append(fields)
    return result


def smi(tool: Path, conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(tool, *args, env={**os.environ, "GPUPROV_STANDIN_GPUS_CONF": str(conf)})
