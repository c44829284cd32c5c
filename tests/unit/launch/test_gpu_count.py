"""Launch preflight's GPU count (`nvidia-smi --query-gpu=index --format=csv,noheader` on each host) against
recorded output of the real tool (tests/recorded/nvidia-smi/). The index column is taken from the recorded
--query-gpu rows; the failures are recorded as printed."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from gpuprov import ssh
from gpuprov.errors import GpuprovError
from gpuprov.launch import preflight
from gpuprov.launch.environments import host_python

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-smi"


def count(monkeypatch: pytest.MonkeyPatch, rc: int, stdout: str) -> int:
    """Run the host check's smi section in a shell whose nvidia-smi prints stdout and exits rc."""
    fake = f"nvidia-smi() {{ printf '%s' {shlex.quote(stdout)}; return {rc}; }}\n"
    if rc == 100:  # no nvidia-smi on the host at all
        fake = "command() { return 1; }\n"
    command = host_python.host_check_command("/nonexistent/python", count_gpus=True)
    smi_line = next(line for line in command.splitlines() if "smi'" in line)
    assert "nvidia-smi --query-gpu=index --format=csv,noheader" in smi_line
    out = subprocess.run(["bash", "-c", fake + smi_line], capture_output=True, text=True).stdout
    body, end = out.split("@@gpuprov smi\n", 1)[1].rsplit("@@gpuprov end ", 1)
    return preflight.gpu_count(ssh.Result(int(end), body, ""))


def recorded_indices() -> str:
    header, *rows = (RECORDED / "csv-2xGPU-570.86.15").read_text().splitlines()
    at = header.split(", ").index("index")
    return "".join(row.split(", ")[at] + "\n" for row in rows)


def test_counts_the_recorded_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    assert count(monkeypatch, 0, recorded_indices()) == 2


@pytest.mark.parametrize(("recording", "rc"), [("error-no-devices", 6), ("error-no-supported-gpus", 255)])
def test_a_host_whose_driver_finds_no_gpu_has_none(
    monkeypatch: pytest.MonkeyPatch, recording: str, rc: int
) -> None:
    assert count(monkeypatch, rc, (RECORDED / recording).read_text()) == 0


def test_a_host_without_nvidia_smi_has_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert count(monkeypatch, 100, "") == 0


@pytest.mark.parametrize(
    "recording",
    ["error-version-mismatch-535.161", "error-version-mismatch-550.144", "error-version-mismatch-580.178"],
)
def test_a_driver_that_cannot_be_used_is_a_problem_not_a_gpu_less_host(
    monkeypatch: pytest.MonkeyPatch, recording: str
) -> None:
    with pytest.raises(GpuprovError) as failure:
        count(monkeypatch, 18, (RECORDED / recording).read_text())
    assert failure.value.message.startswith(
        "nvidia-smi failed (exit 18): Failed to initialize NVML: Driver/library version mismatch; reboot"
    )
