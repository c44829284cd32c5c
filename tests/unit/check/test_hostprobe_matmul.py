"""hostprobe's matmul run: nvidia-smi is read while the GPUs are busy, between `busy` and the result."""

from __future__ import annotations

import json
from pathlib import Path

from gpuprov.onhost import hostprobe


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_nvidia_smi_is_read_while_the_matmul_holds_the_gpus(tmp_path: Path) -> None:
    # The stand-in "python" waits for collect's line before it prints its result, and notes whether
    # nvidia-smi ran before that line came.
    marker = tmp_path / "smi-ran"
    smi = script(tmp_path / "nvidia-smi", f"touch {marker}; echo 'Attached GPUs : 1'\n")
    result = json.dumps({"n": 16384, "dtype": "float16", "tflops": {"0": 1.5}})
    python = script(
        tmp_path / "python",
        f"echo busy; read line; test -e {marker} && echo '{result}'\n",
    )
    run = hostprobe._matmul_under_load(python, smi, "matmul")
    assert run["rc"] == 0 and json.loads(str(run["stdout"])) == json.loads(result)
    busy = run["smi_q_busy"]
    assert isinstance(busy, dict) and busy["stdout"] == "Attached GPUs : 1\n"


def test_a_matmul_that_fails_before_busy_reads_nothing(tmp_path: Path) -> None:
    smi = script(tmp_path / "nvidia-smi", "echo never\n")
    python = script(tmp_path / "python", "echo 'RuntimeError: CUDA error' >&2; exit 1\n")
    run = hostprobe._matmul_under_load(python, smi, "matmul")
    assert run["rc"] == 1 and "CUDA error" in str(run["stderr"])
    busy = run["smi_q_busy"]
    assert isinstance(busy, dict) and busy["rc"] is None
