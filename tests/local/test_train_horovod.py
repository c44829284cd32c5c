"""examples/train_horovod.py for real, two processes on this machine, under horovodrun (Gloo and MPI) and
under Open MPI's mpirun: every launcher ends with the agreement line and the same parameters. Opt-in: it
needs an environment with Horovod built against PyTorch 2.0.1 (docs/horovod.md, "What ran here")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_horovod.py"
HOROVOD_ENV = os.environ.get("GPUPROV_HOROVOD_ENV", "")
AGREEMENT = re.compile(
    r"all-reduce agreement OK: world 2, sum of ranks 1 \(expected 1\), parameter checksums (\S+), \1$"
)

pytestmark = [
    pytest.mark.integration,  # three launches of two processes: half a minute or more
    pytest.mark.skipif(
        not HOROVOD_ENV,
        reason="set GPUPROV_HOROVOD_ENV to a venv with Horovod 0.28.1 built against PyTorch 2.0.1 "
        "(2.2 GB download, a 5-15 min build: too big for CI; docs/horovod.md says how)",
    ),
]

AS_ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []
LAUNCHERS = {
    "horovodrun-gloo": ["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo"],
    "horovodrun-mpi": [
        "horovodrun",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--mpi",
        f"--mpi-args={' '.join(AS_ROOT)}",
    ],
    "mpirun": [
        "mpirun",
        *AS_ROOT,
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        "-x",
        "PATH",
    ],
}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_two_processes_train_and_agree(launcher: str) -> None:
    if launcher != "horovodrun-gloo" and shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed here")
    env = {**os.environ, "PATH": f"{HOROVOD_ENV}/bin:/usr/bin:/bin"}
    command = [*LAUNCHERS[launcher], "python", str(EXAMPLE), "--epochs", "2", "--samples", "2048"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [re.sub(r"^\[[0-9,]+\]<stdout>:", "", line) for line in proc.stdout.splitlines()]
    controller = "Gloo" if launcher == "horovodrun-gloo" else "MPI"
    assert any(line.startswith(f"world size 2, controller {controller}, device cpu") for line in lines)
    assert any(AGREEMENT.search(line) for line in lines), proc.stdout[-3000:]


def test_a_world_smaller_than_the_launcher_started_is_refused() -> None:
    """What a Horovod built without MPI does under mpirun (each rank a world of one): one process told by the
    launcher's variable that it started two must fail, not train alone and print OK."""
    env = {**os.environ, "PATH": f"{HOROVOD_ENV}/bin:/usr/bin:/bin", "HOROVOD_SIZE": "2"}
    command = [f"{HOROVOD_ENV}/bin/python", str(EXAMPLE), "--epochs", "1", "--samples", "256"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "the launcher started 2 processes but Horovod sees a world of 1" in proc.stderr
    assert "agreement" not in proc.stdout
