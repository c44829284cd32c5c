"""Horovod asked for with a PyTorch it cannot build against: refused through the commands a user runs, in one
line naming the fact and the newest PyTorch that works, before anything is applied to a host.

The hosts are 127.0.0.1 on closed ports (conftest's `work`): `check` refuses the lock before contacting any
host (exit 2); `bootstrap` reports the lock beside its host checks and exits 6, because an unreachable host
wins over bad input (docs/exit-codes.md), and nothing is applied."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gpuprov.sandbox.inventory import SANDBOX_LOCK
from tests.unit.bad_input.commands import one_error
from tests.unit.bad_input.commands import real_gpuprov as gpuprov

REFUSAL = "horovod_version 0.28.1 does not build against pytorch_version 2.13.0: "
NEWEST = "the newest PyTorch it builds against is 2.0.x (in the table: 2.0.1)"


def _lock(work: Path, **changes: str) -> Path:
    path = work / "group_vars" / "all" / "gpu_stack.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"gpu_stack": {**SANDBOX_LOCK, **changes}}))
    return path


def test_check_refuses_horovod_with_pytorch_2_13_before_any_host(work: Path) -> None:
    _lock(work, horovod_version="0.28.1")
    message = one_error(gpuprov("check", "inventory.ini", cwd=work), 2)
    assert REFUSAL in message and NEWEST in message and "horovod#3996, #4014" in message
    assert not (work / "state" / "checks").exists()


def test_bootstrap_reports_the_refusal_and_applies_nothing(work: Path) -> None:
    _lock(work, horovod_version="0.28.1")
    proc = gpuprov("bootstrap", "inventory.ini", "--json", cwd=work)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 6, proc.stderr  # the closed ports; the lock alone would be 2
    summary = json.loads(proc.stdout)
    assert summary["status"] == "preflight_failed"  # stopped before Ansible ran
    [problem] = summary["preflight"]["lock_problems"]
    assert problem["check"] == "lock"
    assert problem["message"].startswith(REFUSAL) and NEWEST in problem["message"]
    assert "nothing was applied to any host" in proc.stderr


def test_a_legacy_lock_passes_the_lock_check(work: Path) -> None:
    _lock(work, horovod_version="0.28.1", pytorch_version="2.0.1", pytorch_cuda_tag="cpu")
    proc = gpuprov("bootstrap", "inventory.ini", "--json", cwd=work)
    assert proc.returncode == 6, proc.stderr  # only the hosts, which refuse every connection
    assert json.loads(proc.stdout)["preflight"]["lock_problems"] == []
