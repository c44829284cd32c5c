"""python_env's horovod_check_build filter against a real Horovod 0.28.1's output (tests/recorded/horovod)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.unit.roles.plugins import role_plugin

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "horovod"


def _plugin() -> ModuleType:
    return role_plugin("python_env", "horovod_build.py")


def test_a_real_cpu_build_with_mpi_and_gloo() -> None:
    text = (RECORDED / "check-build-0.28.1-cpu-mpi-gloo.txt").read_text()
    assert _plugin().horovod_check_build(text) == {
        "version": "0.28.1",
        "frameworks": ["PyTorch"],
        "controllers": ["Gloo", "MPI"],
        "operations": ["Gloo", "MPI"],
    }


def test_unticking_nccl_in_the_recording_is_seen() -> None:
    text = (RECORDED / "check-build-0.28.1-cpu-mpi-gloo.txt").read_text()
    with_nccl = text.replace("[ ] NCCL", "[X] NCCL").replace(
        "    [X] MPI\n    [X] Gloo\n", "    [ ] MPI\n    [X] Gloo\n", 1
    )
    parsed = _plugin().horovod_check_build(with_nccl)
    assert parsed["operations"] == ["Gloo", "MPI", "NCCL"]
    assert parsed["controllers"] == ["Gloo"]


def test_no_horovod_is_an_empty_build() -> None:
    missing = "[Errno 2] No such file or directory: b'/opt/gpuprov/envs/train/bin/horovodrun'"
    for text in ("", None, missing, "Traceback (most recent call last):\nImportError: x"):
        assert _plugin().horovod_check_build(text) == {
            "version": "",
            "frameworks": [],
            "controllers": [],
            "operations": [],
        }
