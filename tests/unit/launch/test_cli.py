"""The real `gpuprov launch` command for what needs no host: --emit-sbatch and input mistakes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def _gpuprov(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GPUPROV_STATE_DIR": str(cwd / "state")}
    return subprocess.run(
        [str(BIN / "gpuprov"), *args], capture_output=True, text=True, cwd=cwd, env={**base, **(env or {})}
    )


def test_emit_sbatch_writes_a_valid_script(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    proc = _gpuprov(
        "launch", "--nodes", "2", "--emit-sbatch", "job.sbatch", "train.py", "--", "--lr", "0.1", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in text and "srun" in text and "-m torch.distributed.run" in text
    assert text.rstrip().endswith("train.py --lr 0.1")
    assert subprocess.run(["bash", "-n", str(tmp_path / "job.sbatch")]).returncode == 0
    assert not (tmp_path / "state" / "jobs").exists()  # nothing launched


def test_missing_script_is_one_line(tmp_path: Path) -> None:
    proc = _gpuprov("launch", "--nodes", "2", "nope.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: script nope.py does not exist; give the path of your training script"
    ]


def test_no_inventory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    proc = _gpuprov("launch", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no inventory found: pass -i INVENTORY")


def test_unknown_job(tmp_path: Path) -> None:
    for command in (["logs", "20250101-000000-abcd"], ["stop", "20250101-000000-abcd"], ["logs", "x"]):
        proc = _gpuprov(*command, cwd=tmp_path)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_jobs_empty(tmp_path: Path) -> None:
    proc = _gpuprov("jobs", cwd=tmp_path)
    assert proc.returncode == 0 and "No jobs recorded" in proc.stderr
