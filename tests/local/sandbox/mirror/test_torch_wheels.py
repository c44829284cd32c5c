"""The full mirror's PyPI index for real: pip downloads CPU torch, and a fresh venv installs it from the
index alone."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov.sandbox import mirror
from tests.local.sandbox.mirror.helpers import (
    needs_build_tools,
    run,
    serve,
)

pytestmark = needs_build_tools


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_torch_installs_from_the_mirror_index_into_a_fresh_venv(tmp_path: Path) -> None:
    """The full mirror (real pip download) serves CPU torch to a venv that sees no other index. It is the
    mirror the sandboxes serve, in the machine's cache as for them (tests/integration/conftest.py): built
    here only when no sandbox of the run built it already (a second copy in a temporary cache cost CI about
    half a minute for the same content)."""
    content = mirror.ensure_mirror_content()
    wheels = content.root / "pypi" / "wheels"
    torch_wheel = next(wheels.glob("torch-2.13.0+cpu-*.whl"))
    page = (content.root / "pypi/simple/torch/index.html").read_text()
    assert f"#sha256={hashlib.sha256(torch_wheel.read_bytes()).hexdigest()}" in page
    assert not list(wheels.glob("nvidia*")) and not list(wheels.glob("triton*"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    isolated = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    isolated["PIP_CONFIG_FILE"] = os.devnull  # no find-links or extra index of this machine's pip config
    with serve(content.root) as url:
        install = run(
            venv / "bin/pip",
            "install",
            "--no-cache-dir",
            "--index-url",
            f"{url}/pypi/simple",
            "torch==2.13.0",
            env=isolated,
        )
        assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    version = run(venv / "bin/python", "-c", "import torch; print(torch.__version__)", env=isolated)
    assert version.stdout.strip() == "2.13.0+cpu"
