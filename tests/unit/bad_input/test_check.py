"""What `gpuprov check` refuses before any host is contacted (exit 2, one line), and what an unreachable host
gives: the hosts here are 127.0.0.1 on closed ports (1, 2), so every SSH connection is refused at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
LOCK = (
    "gpu_stack:\n  driver_branch: '550'\n  driver_version: '550.127.08'\n  driver_flavor: open\n"
    "  cuda_version: '12.4.1'\n  cudnn_version: '9.5.1.17'\n  nccl_version: '2.21.5'\n"
    "  pytorch_version: '2.13.0'\n  pytorch_cuda_tag: cpu\n"
)


def gpuprov(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "GPUPROV_STATE_DIR": str(cwd / "state"),
        "COLUMNS": "250",
    }
    return subprocess.run(
        [str(BIN / "gpuprov"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def one_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    assert proc.returncode == code, proc.stderr
    return errors[0]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\n"
        "node1 ansible_host=127.0.0.1 ansible_port=1\n"
        "node2 ansible_host=127.0.0.1 ansible_port=2\n"
    )
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "gpu_stack.yml").write_text(LOCK)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--only", "gpu,torch"], "--only: no check named 'gpu'"),
        (["--skip", ""], "--skip is empty"),
        (["-e", "not a pair"], "give KEY=VALUE or @FILE"),
        (["-e", "gpu_stack={}"], "the lock does not fit"),
        (["--limit", "node9"], "node9"),
        (["missing.ini"], "does not exist"),
    ],
)
def test_bad_input_exits_2_before_any_host(work: Path, args: list[str], says: str) -> None:
    inventory = [] if any(a.endswith(".ini") for a in args) else ["inventory.ini"]
    proc = gpuprov("check", *inventory, *args, cwd=work)
    assert says in one_error(proc, 2)
    assert not (work / "state" / "checks").exists()  # nothing recorded, no host contacted


def test_no_lock_is_bad_input(work: Path) -> None:
    (work / "group_vars" / "all" / "gpu_stack.yml").unlink()
    assert "has no gpu_stack" in one_error(gpuprov("check", "inventory.ini", cwd=work), 2)


def test_unreachable_hosts_fail_and_are_recorded(work: Path) -> None:
    proc = gpuprov("check", "inventory.ini", "--json", "--quick", cwd=work)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert [(r["check"], r["host"], r["status"]) for r in summary["results"]] == [
        ("ssh", "node1", "fail"),
        ("ssh", "node2", "fail"),
    ]
    assert "connect" in summary["results"][0]["detail"]
    saved = list((work / "state" / "checks").glob("*/results.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["exit_code"] == 1
