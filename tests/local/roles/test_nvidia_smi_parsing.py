"""The roles' reading of nvidia-smi, fed recorded output of the real tool (tests/recorded/nvidia-smi/).

The role's own tasks run on localhost (local_play) with an `nvidia-smi` on PATH that prints a recording and
exits with the recorded status. Where no paste of the exact query a task runs exists, its answer is built
from a recording of the same fields: the `--query-gpu` rows of csv-2xGPU-570.86.15 in the order the task
asks for (the format, ", " between unquoted fields, is the recorded one), persistence from the recorded
`-q` field (the query field has the same values, see SOURCES.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.local.roles.local_play import CaseResult, role_task, run_cases, run_play

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-smi"


def fake_smi(tmp_path: Path, output: str, rc: int = 0) -> dict[str, str]:
    """An nvidia-smi that answers OUTPUT on stdout and exits RC; the environment that puts it first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "answer").write_text(output)
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\ncat '{bin_dir / 'answer'}'\nexit {rc}\n")
    tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def csv_rows(fields: list[str]) -> str:
    """The recorded --query-gpu rows (noheader), with FIELDS picked in the order given."""
    header, *rows = (RECORDED / "csv-2xGPU-570.86.15").read_text().splitlines()
    names = header.split(", ")
    return "".join(
        ", ".join(dict(zip(names, row.split(", "), strict=True))[f] for f in fields) + "\n" for row in rows
    )


# nvidia_driver: verify-gpu.yml, every case below in one ansible-playbook run (local_play.run_cases): each
# case is a host with its own recorded nvidia-smi first on PATH and its own inputs.

RECORDED_LIST = csv_rows(["index", "name", "driver_version"])
MISMATCH = "error-version-mismatch-"
NO_DEVICES = (RECORDED / "error-no-devices").read_text()
# case: (what nvidia-smi prints, its exit status, the inputs)
VERIFY_CASES: dict[str, tuple[str, int, dict[str, Any]]] = {
    "locked": (RECORDED_LIST, 0, {"nvidia_driver_version": "570.86.15", "__nvidia_driver_pci_gpu_count": 2}),
    "other-driver": (
        RECORDED_LIST,
        0,
        {"nvidia_driver_version": "570.86.16", "__nvidia_driver_pci_gpu_count": 2},
    ),
    "gpu-missing": (
        RECORDED_LIST,
        0,
        {"nvidia_driver_version": "570.86.15", "__nvidia_driver_pci_gpu_count": 3},
    ),
    **{
        f"{MISMATCH}{driver}": (
            (RECORDED / f"{MISMATCH}{driver}").read_text(),
            18,
            {"nvidia_driver_version": "550.144.03", "__nvidia_driver_marker": {"stat": {"exists": True}}},
        )
        for driver in ("535.161", "550.144")
    },
    "after-reboot": (
        (RECORDED / f"{MISMATCH}580.178").read_text(),
        18,
        {
            "nvidia_driver_version": "580.178.04",
            "__nvidia_driver_marker": {"stat": {"exists": True}},
            "__nvidia_driver_after_reboot": True,
        },
    ),
    # The recording does not show the exit status; the role reads the message, whatever the status.
    "no-gpu-allowed": (
        NO_DEVICES,
        6,
        {"nvidia_driver_version": "570.124.06", "nvidia_driver_allow_no_gpu": True},
    ),
    "no-gpu-refused": (NO_DEVICES, 6, {"nvidia_driver_version": "570.124.06"}),
}


@pytest.fixture(scope="module")
def verify_gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    """Each case's result of verify-gpu.yml: failed or not, and what Ansible printed about it."""
    tmp_path = tmp_path_factory.mktemp("verify-gpu")
    task = {
        "name": "Verify",
        "ansible.builtin.include_role": {"name": "nvidia_driver", "tasks_from": "verify-gpu.yml"},
    }
    paths = {name: fake_smi(tmp_path / name, out, rc)["PATH"] for name, (out, rc, _) in VERIFY_CASES.items()}
    cases = {
        name: {"nvidia_driver_allow_no_gpu": False, **inputs} for name, (_, _, inputs) in VERIFY_CASES.items()
    }
    return run_cases(tmp_path, [task], cases, paths=paths)


def test_the_locked_driver_on_every_recorded_gpu_passes(verify_gpu: dict[str, CaseResult]) -> None:
    result = verify_gpu["locked"]
    assert not result.failed, result.output[-3000:]
    assert "2 GPU(s) with driver 570.86.15" in result.output


@pytest.mark.parametrize(
    ("case", "version", "pci_gpus"),
    [("other-driver", "570.86.16", 2), ("gpu-missing", "570.86.15", 3)],
    ids=["other-driver", "gpu-missing"],
)
def test_another_driver_or_a_gpu_missing_from_the_recorded_list_fails(
    verify_gpu: dict[str, CaseResult], case: str, version: str, pci_gpus: int
) -> None:
    result = verify_gpu[case]
    assert result.failed
    assert f"wanted driver {version} on all {pci_gpus} GPUs" in " ".join(result.output.split())


@pytest.mark.parametrize("recording", ["error-version-mismatch-535.161", "error-version-mismatch-550.144"])
def test_a_version_mismatch_before_the_reboot_is_reported_as_waiting(
    verify_gpu: dict[str, CaseResult], recording: str
) -> None:
    result = verify_gpu[recording]
    assert not result.failed, result.output[-3000:]
    assert "cannot use the driver yet" in result.output and "Driver/library version mismatch" in result.output


def test_a_version_mismatch_after_the_reboot_fails_with_the_driver_hint(
    verify_gpu: dict[str, CaseResult],
) -> None:
    result = verify_gpu["after-reboot"]
    assert result.failed
    flat = " ".join(result.output.split())
    assert "failed (exit 18): Failed to initialize NVML: Driver/library version mismatch" in flat
    assert "The driver is not loaded" in flat


@pytest.mark.parametrize(("allowed", "passes"), [(True, True), (False, False)])
def test_no_devices_passes_only_where_a_host_without_gpus_is_allowed(
    verify_gpu: dict[str, CaseResult], allowed: bool, passes: bool
) -> None:
    case = "no-gpu-allowed" if allowed else "no-gpu-refused"
    result = verify_gpu[case]
    assert result.failed != passes, result.output[-3000:]
    flat = " ".join(result.output.split())
    if passes:
        assert f"no GPU on {case}: nvidia-smi says 'No devices were found'" in flat
    else:
        assert "For a host without GPUs set nvidia_driver_allow_no_gpu: true." in flat


# nvidia_driver: verify-persistence.yml


@pytest.mark.parametrize(
    ("recording", "passes"), [("query-1xA40-550.127.05", True), ("query-1xV100-535.86.10", False)]
)
def test_persistence_check_reads_the_recorded_values(tmp_path: Path, recording: str, passes: bool) -> None:
    value = re.search(r"(?m)^    Persistence Mode +: (\w+)$", (RECORDED / recording).read_text())
    assert value is not None
    answer = f"0, {value[1]}\n"  # --query-gpu=index,persistence_mode --format=csv,noheader
    task = role_task("nvidia_driver", "verify-persistence.yml", "Check that persistence mode is on")
    extra = {
        "__nvidia_driver_pm": {"rc": 0, "stdout": answer, "stdout_lines": answer.splitlines()},
        "__nvidia_driver_persistenced_unit": "/etc/systemd/system/nvidia-persistenced.service",
    }
    proc = run_play(tmp_path, [task], extra)
    assert (proc.returncode == 0) == passes, proc.stdout[-3000:]
    if not passes:
        assert "Persistence mode is not on for every GPU" in proc.stdout


# python_env: the GPU count read from `nvidia-smi -L`


# recording: nvidia-smi's exit status with it
DECISION_CASES = {
    "list-2xGPU-570.86.15": 0,
    "list-2xQuadroRTX4000-535.129.03": 0,
    "error-version-mismatch-550.144": 18,
}


@pytest.fixture(scope="module")
def python_env_decision(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The role's own `__has_gpu` expression (preflight.yml, "Decide the PyTorch build"), evaluated alone
    (the rest of that task needs the whole inventory), for each recording above in one ansible-playbook run
    (run_cases: the task runs alone, its inputs are all it reads)."""
    decide = role_task("python_env", "preflight.yml", "Decide the PyTorch build")
    show = {
        "name": "Show the decision",
        "ansible.builtin.debug": {"msg": "has_gpu={{ __has_gpu | trim }}"},
        "vars": {"__has_gpu": decide["vars"]["__has_gpu"]},
    }
    cases = {
        recording: {
            "__python_env_pci_gpus": {"stdout": "0"},  # no GPU on the PCI bus: the decision is nvidia-smi's
            "__python_env_smi": {"rc": rc, "stdout": (RECORDED / recording).read_text()},
        }
        for recording, rc in DECISION_CASES.items()
    }
    decisions = {}
    for recording, result in run_cases(tmp_path_factory.mktemp("decide"), [show], cases).items():
        assert not result.failed, result.output[-3000:]
        found = re.search(r"has_gpu=(\w+)", result.output)
        assert found is not None, result.output[-3000:]
        decisions[recording] = found[1]
    return decisions


@pytest.mark.parametrize("recording", ["list-2xGPU-570.86.15", "list-2xQuadroRTX4000-535.129.03"])
def test_python_env_sees_the_gpus_of_a_recorded_list(
    python_env_decision: dict[str, str], recording: str
) -> None:
    assert python_env_decision[recording] == "True"


def test_python_env_sees_no_gpu_where_nvidia_smi_fails(python_env_decision: dict[str, str]) -> None:
    assert python_env_decision["error-version-mismatch-550.144"] == "False"


@pytest.mark.parametrize(
    ("recording", "gpus_in_probe", "passes"),
    [("list-2xGPU-570.86.15", 2, True), ("list-2xGPU-570.86.15", 1, False)],
)
def test_python_env_verify_counts_the_recorded_list(
    tmp_path: Path, recording: str, gpus_in_probe: int, passes: bool
) -> None:
    task = role_task("python_env", "verify.yml", "Check CUDA starts")
    probed = {"cuda_device_count": gpus_in_probe, "cuda_ops": [True] * gpus_in_probe, "cuda_warnings": []}
    extra = {
        "python_env_pytorch": True,
        "python_env_path": "/opt/gpuprov/env",
        "__python_env_wheel_tag": "cu124",
        "__python_env_smi": {"rc": 0, "stdout": (RECORDED / recording).read_text()},
        "__python_env_probe": {"stdout": json.dumps(probed)},
    }
    proc = run_play(tmp_path, [task], extra)
    assert (proc.returncode == 0) == passes, proc.stdout[-3000:]
    if not passes:
        assert "nvidia-smi lists 2 GPU(s), PyTorch counts 1" in proc.stdout
