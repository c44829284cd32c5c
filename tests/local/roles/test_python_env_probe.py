"""python_env's probe (files/probe.py) reports whether CUDA runs on every GPU, so that verify.yml can fail a
host whose nvidia-smi lists GPUs that CUDA cannot start. The probe runs here against a minimal fake `torch`
module (the machine has no GPU), shaped on what torch does on an NVSwitch system without fabric manager:
device_count() warns "CUDA initialization: ... Error 802: system not yet initialized" and returns 0
(microsoft/lisa issue 2823)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuprov import resources
from tests.local.roles.local_play import role_task, run_play

PROBE = resources.data_dir("roles") / "python_env" / "files" / "probe.py"

FAKE_TORCH = """
import os, warnings

__version__ = "2.5.1+cu124"


class version:
    cuda = "12.4"


class _Tensor:
    def __init__(self, device):
        if device.startswith("cuda:") and device in os.environ.get("FAKE_BROKEN", "").split():
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        self.T = self

    def reshape(self, *shape):
        return self

    def __matmul__(self, other):
        return self

    def sum(self):
        return self

    def item(self):
        return 83.0


def arange(end, device="cpu"):
    return _Tensor(device)


class cuda:
    @staticmethod
    def device_count():
        if os.environ.get("FAKE_NOT_READY"):
            warnings.warn(
                "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet "
                "initialized"
            )
            return 0
        return int(os.environ.get("FAKE_GPUS", "0"))
"""


def probe(tmp_path: Path, **env: str) -> dict[str, object]:
    (tmp_path / "torch").mkdir(exist_ok=True)
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    proc = subprocess.run(
        [sys.executable, str(PROBE)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path), **env},
    )
    return json.loads(proc.stdout)


def test_every_gpu_runs_a_matmul(tmp_path: Path) -> None:
    info = probe(tmp_path, FAKE_GPUS="2")
    assert (info["cuda_device_count"], info["cuda_ops"], info["cuda_warnings"]) == (2, [True, True], [])


def test_cuda_that_cannot_start_counts_no_device_and_keeps_the_warning(tmp_path: Path) -> None:
    info = probe(tmp_path, FAKE_NOT_READY="1")
    assert info["cuda_device_count"] == 0
    assert info["cuda_ops"] == []
    assert isinstance(info["cuda_warnings"], list)
    assert "Error 802: system not yet initialized" in info["cuda_warnings"][0]


def test_a_gpu_that_fails_is_named_with_its_error(tmp_path: Path) -> None:
    info = probe(tmp_path, FAKE_GPUS="2", FAKE_BROKEN="cuda:1")
    assert info["cuda_ops"] == [True, "RuntimeError: CUDA error: an illegal memory access was encountered"]


VERIFY = resources.data_dir("roles") / "python_env" / "tasks" / "verify.yml"
SMI_L = (  # nvidia-smi -L on a 2-GPU host
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1d6c5b4e-6f0a-2a5b-8e4e-3f1c2b7a9d10)\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-7a2e9c31-0b4d-4c8e-9f12-5d6e7f8a9b0c)\n"
)


def check_cuda(tmp_path: Path, probed: dict[str, object]) -> subprocess.CompletedProcess[str]:
    task = role_task("python_env", "verify.yml", "Check CUDA starts")
    extra = {
        "python_env_pytorch": True,
        "python_env_path": "/opt/gpuprov/env",
        "__python_env_wheel_tag": "cu124",
        "__python_env_smi": {"rc": 0, "stdout": SMI_L},
        "__python_env_probe": {"stdout": json.dumps(probed)},
    }
    return run_play(tmp_path, [task], extra)


def test_verify_fails_a_host_where_cuda_cannot_start(tmp_path: Path) -> None:
    proc = check_cuda(tmp_path, probe(tmp_path, FAKE_NOT_READY="1"))
    assert proc.returncode != 0
    assert "nvidia-smi lists 2 GPU(s), PyTorch counts 0" in proc.stdout
    assert "Error 802" in proc.stdout


def test_verify_passes_a_host_where_cuda_runs_on_every_gpu(tmp_path: Path) -> None:
    proc = check_cuda(tmp_path, probe(tmp_path, FAKE_GPUS="2"))
    assert proc.returncode == 0, proc.stdout[-2000:]
