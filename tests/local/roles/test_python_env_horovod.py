"""python_env's Horovod tasks (tasks/horovod.yml) on this machine with real ansible-playbook: the build each
kind of host gets, and, opt-in, the whole task file against an environment that holds a real Horovod."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import role_task, run_cases, run_play

ROLE = resources.data_dir("roles") / "python_env"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
DECIDE = role_task("python_env", "horovod.yml", "Decide the Horovod build")
SHOW = {"name": "Show", "ansible.builtin.debug": {"msg": "WANT {{ __python_env_horovod_want | to_json }}"}}

# An environment with Horovod built against PyTorch 2.0.1 (docs/horovod.md, "What ran here"): a 2.2 GB
# download and a 5-7 minute compile, too big for CI, so only where a developer names one.
HOROVOD_ENV = os.environ.get("GPUPROV_HOROVOD_ENV", "")
needs_horovod_env = pytest.mark.skipif(
    not HOROVOD_ENV,
    reason="set GPUPROV_HOROVOD_ENV to a venv with Horovod 0.28.1 built against PyTorch 2.0.1 "
    "(2.2 GB download, a 5-15 min build: too big for CI; docs/horovod.md says how)",
)


def _want(output: str) -> dict[str, Any]:
    line = next(line for line in output.splitlines() if "WANT " in line)
    return yaml.safe_load(line.split("WANT ", 1)[1].rstrip('"').replace('\\"', '"'))


def test_each_host_gets_the_build_that_fits_it(tmp_path: Path) -> None:
    mpicxx = {"rc": 0, "stdout": "/usr/lib64/openmpi/bin/mpicxx"}
    no_mpicxx = {"rc": 1, "stdout": ""}
    cases = {
        "gpu_with_mpi": {"__python_env_wheel_tag": "cu118", "__python_env_horovod_mpicxx": mpicxx},
        "cpu_with_mpi": {"__python_env_wheel_tag": "cpu", "__python_env_horovod_mpicxx": mpicxx},
        "cpu_no_mpi": {"__python_env_wheel_tag": "cpu", "__python_env_horovod_mpicxx": no_mpicxx},
        "cpu_mpi_off": {
            "__python_env_wheel_tag": "cpu",
            "__python_env_horovod_mpicxx": mpicxx,
            "python_env_horovod_mpi": False,
        },
        # The mpi role switched on: MPI is required (no silent Gloo-only build under mpirun).
        "cpu_mpi_role": {
            "__python_env_wheel_tag": "cpu",
            "__python_env_horovod_mpicxx": no_mpicxx,
            "mpi_enabled": True,
        },
    }
    cases = {
        name: {"python_env_horovod_mpi": DEFAULTS["python_env_horovod_mpi"], **c} for name, c in cases.items()
    }
    play_vars = {"python_env_horovod_version": "0.28.1"}
    results = run_cases(tmp_path, [DECIDE, SHOW], cases, play_vars=play_vars)
    want = {name: _want(result.output) for name, result in results.items()}
    assert want["gpu_with_mpi"]["build"] == {
        "version": "0.28.1",
        "frameworks": ["PyTorch"],
        "controllers": ["Gloo", "MPI"],
        "operations": ["Gloo", "MPI", "NCCL"],
    }
    assert want["gpu_with_mpi"]["mpi_bin"] == "/usr/lib64/openmpi/bin"  # EL: the module's directory
    assert want["cpu_with_mpi"]["build"]["operations"] == ["Gloo", "MPI"]
    assert want["cpu_no_mpi"]["build"]["controllers"] == ["Gloo"]
    assert want["cpu_no_mpi"]["build"]["operations"] == ["Gloo"]
    assert want["cpu_mpi_off"]["build"]["operations"] == ["Gloo"]
    assert not want["cpu_mpi_off"]["mpi"]
    assert want["cpu_mpi_role"]["mpi"] and want["cpu_mpi_role"]["build"]["controllers"] == ["Gloo", "MPI"]


def _play(tmp_path: Path, **changes: Any) -> subprocess.CompletedProcess[str]:
    """The whole task file on localhost against GPUPROV_HOROVOD_ENV as a CPU host (wheel tag cpu, pip)."""
    tasks = [{"ansible.builtin.include_tasks": str(ROLE / "tasks" / "horovod.yml")}]
    extra = {
        **{k: v for k, v in DEFAULTS.items() if k.startswith("python_env_")},
        "python_env_path": HOROVOD_ENV,
        "python_env_horovod_version": "0.28.1",
        "python_env_horovod_build_jobs": "2",
        "__python_env_wheel_tag": "cpu",
        "__python_env_installer": "pip",
        **changes,
    }
    env = {
        "ANSIBLE_FILTER_PLUGINS": str(ROLE / "filter_plugins"),
        "PATH": f"/usr/local/bin:/usr/bin:/bin:{Path(sys.executable).parent}",
    }
    return run_play(tmp_path, tasks, extra, env=env)


@needs_horovod_env
def test_a_cpu_build_is_refused_where_horovods_cmake_would_build_cuda(tmp_path: Path) -> None:
    """Asked for other flags than the environment's Horovod has, on a machine where the environment's torch is
    a CUDA build and torch finds a CUDA toolkit: refused before anything is installed or compiled."""
    probe = (
        "import json, torch; from torch.utils.cpp_extension import CUDA_HOME as h; "
        "print(json.dumps([torch.version.cuda, h]))"
    )
    seen = json.loads(
        subprocess.run(
            [f"{HOROVOD_ENV}/bin/python", "-c", probe], capture_output=True, text=True, check=True
        ).stdout
    )
    if None in seen:
        pytest.skip(f"needs a CUDA build of torch and a CUDA toolkit here (torch CUDA, CUDA_HOME: {seen})")
    built = subprocess.run(
        [f"{HOROVOD_ENV}/bin/horovodrun", "--check-build"], capture_output=True, text=True, check=True
    ).stdout
    proc = _play(tmp_path, python_env_horovod_mpi="[X] MPI" not in built)  # the other MPI setting
    assert proc.returncode != 0
    assert "so Horovod's CMake (FindPytorch) would build CUDA code for a CPU-only lock" in proc.stdout
    assert _result("Install what compiling Horovod needs", proc.stdout) == "absent"
    after = subprocess.run([f"{HOROVOD_ENV}/bin/horovodrun", "--check-build"], capture_output=True, text=True)
    assert after.stdout == built  # the environment's Horovod is as it was


@needs_horovod_env
def test_an_environment_with_the_wanted_build_is_left_alone_and_verified(tmp_path: Path) -> None:
    """The whole task file against the given environment: horovodrun --check-build matches what this machine
    wants (CPU: Gloo, and MPI where mpicxx is here), so nothing is built (changed=0) and the checks pass."""
    proc = _play(tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "changed=0" in proc.stdout and "failed=0" in proc.stdout
    assert _result("Compile and install Horovod 0.28.1", proc.stdout) == "skipping"
    assert _result("Check the build has the version and flags wanted", proc.stdout) == "ok"
    assert _result("Start Horovod in one process (hvd.init, an allreduce)", proc.stdout) == "ok"


def _result(task: str, stdout: str) -> str:
    """The default callback's first result word (ok, changed, skipping, fatal) after TASK [task], or
    "absent" when the task did not run at all."""
    if f"TASK [{task}]" not in stdout:
        return "absent"
    after = stdout.split(f"TASK [{task}]", 1)[1].splitlines()
    results = ("ok:", "changed:", "skipping:", "fatal:")
    return next(line.split(":", 1)[0] for line in after if line.startswith(results))
