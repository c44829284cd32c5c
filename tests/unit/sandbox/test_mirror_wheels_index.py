"""The mirror's PyPI index on fake wheels: PEP 503 pages with sha256 links, and CUDA builds of torch refused
(tests/local/sandbox/mirror/test_torch_wheels.py installs real torch from it)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from gpuprov.errors import EnvironmentProblem
from gpuprov.sandbox import mirror


def test_simple_index_links_wheels_with_their_sha256(tmp_path: Path) -> None:
    wheels = tmp_path / "pypi" / "wheels"
    wheels.mkdir(parents=True)
    names = [
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "typing_extensions-4.16.0-py3-none-any.whl",
    ]
    for name in names:
        (wheels / name).write_bytes(name.encode())
    mirror.write_simple_index(tmp_path / "pypi" / "simple", sorted(wheels.iterdir()))

    page = (tmp_path / "pypi/simple/torch/index.html").read_text()
    href, digest = re.search(r'href="([^"#]+)#sha256=([0-9a-f]{64})"', page).groups()  # type: ignore[union-attr]
    assert href == "../../wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert digest == hashlib.sha256(names[0].encode()).hexdigest()
    assert (tmp_path / "pypi/simple/typing-extensions/index.html").is_file()  # PEP 503 normalised
    root = (tmp_path / "pypi/simple/index.html").read_text()
    assert '<a href="torch/">torch</a>' in root and '<a href="typing-extensions/">' in root


def test_a_cuda_build_of_torch_is_refused() -> None:
    cpu = ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "numpy-2.4.6-cp311-cp311-x.whl"]
    mirror.check_cpu_only(cpu)
    with pytest.raises(EnvironmentProblem, match="CUDA build of torch"):
        mirror.check_cpu_only(["torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"])
    with pytest.raises(EnvironmentProblem, match="CUDA build of torch"):
        mirror.check_cpu_only([*cpu, "nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl"])
