"""What `gpuprov check` refuses before any host is contacted (exit 2, one line), and what an unreachable host
gives: the hosts here are 127.0.0.1 on closed ports (1, 2), so every SSH connection is refused at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.bad_input.commands import one_error
from tests.unit.bad_input.commands import real_gpuprov as gpuprov

LOCK = (
    "gpu_stack:\n  driver_branch: '550'\n  driver_version: '550.127.08'\n  driver_flavor: open\n"
    "  cuda_version: '12.4.1'\n  cudnn_version: '9.5.1.17'\n  nccl_version: '2.21.5'\n"
    "  pytorch_version: '2.13.0'\n  pytorch_cuda_tag: cpu\n"
)


@pytest.fixture
def work(work: Path) -> Path:
    """conftest's two refusing hosts, with a lock in group_vars."""
    (work / "group_vars" / "all").mkdir(parents=True)
    (work / "group_vars" / "all" / "gpu_stack.yml").write_text(LOCK)
    return work


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
