"""`gpuprov launch` for what needs no host: --emit-sbatch and input mistakes; the real command for an sbatch
script and an empty job list, main() in this process (tests/unit/in_process.py) for the mistakes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov import cli, console
from tests.unit import in_process

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


def _in_process(*args: str, cwd: Path) -> in_process.Result:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GPUPROV_STATE_DIR": str(cwd / "state")}
    return in_process.gpuprov(*args, cwd=cwd, env=env)


def test_missing_script_is_one_line(tmp_path: Path) -> None:
    proc = _in_process("launch", "--nodes", "2", "nope.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: script nope.py does not exist; give the path of your training script"
    ]


def test_no_inventory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    proc = _in_process("launch", "train.py", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no inventory found: pass -i INVENTORY")


def test_unknown_job(tmp_path: Path) -> None:
    for command in (["logs", "20250101-000000-abcd"], ["stop", "20250101-000000-abcd"], ["logs", "x"]):
        proc = _in_process(*command, cwd=tmp_path)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_jobs_empty(tmp_path: Path) -> None:
    proc = _gpuprov("jobs", cwd=tmp_path)
    assert proc.returncode == 0 and "No jobs recorded" in proc.stderr


# ----- driven through gpuprov.cli.main(argv), in this process ---------------------------------------------


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory with train.py and an inventory of two hosts that refuse connections (closed ports)."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\n"
        "node1 ansible_host=127.0.0.1 ansible_port=1 gpuprov_master_addr=192.0.2.1\n"
        "node2 ansible_host=127.0.0.1 ansible_port=2\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("GPUPROV_INVENTORY", raising=False)
    monkeypatch.setattr(sys, "argv", ["pytest", "not", "these"])  # what main(argv) must not read
    yield tmp_path
    console.set_verbosity(console.Verbosity.NORMAL)  # -q/-v set it for the process


def _main(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    return int(done.value.code or 0)


@pytest.mark.parametrize(
    "given",
    [
        ["--nodes", "2", "--emit-sbatch", "job.sbatch", "train.py", "--", "--lr", "0.1"],
        ["--nodes", "2", "--emit-sbatch", "job.sbatch", "train.py", "--lr", "0.1"],
    ],
    ids=["with-separator", "without-separator"],
)
def test_main_drives_launch_and_the_sbatch_records_its_arguments(here: Path, given: list[str]) -> None:
    assert _main("-q", "launch", *given) == 0
    text = (here / "job.sbatch").read_text()
    assert f"the same job as `gpuprov launch {' '.join(given)}`," in text  # not sys.argv, not `-q launch`
    assert text.rstrip().endswith("train.py --lr 0.1")


def test_options_after_the_script_are_the_scripts(here: Path) -> None:
    # `-h` and an unknown option after SCRIPT go to the script, not to click (no help, no usage error).
    assert _main("launch", "--emit-sbatch", "job.sbatch", "train.py", "-h", "--x=1") == 0
    assert (here / "job.sbatch").read_text().rstrip().endswith("train.py -h --x=1")


def test_main_ends_an_unreachable_preflight_with_6(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main("launch", "-i", "inventory.ini", "--dry-run", "train.py", "--", "--lr", "0.1") == 6
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == ["error: preflight found 2 problems (listed above); nothing was started"]
