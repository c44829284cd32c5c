"""Which site.yml tags a batch's run gets (gpuprov.upgrade.actions.batch_roles)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuprov.upgrade import actions
from gpuprov.upgrade.state import Rollout


def rollout(roles: dict[str, list[str]]) -> Rollout:
    hosts = {name: {"changes": {"roles": given}} for name, given in roles.items()}
    return Rollout(Path("/nonexistent"), {"hosts": hosts})


def test_a_batch_runs_the_roles_its_hosts_change() -> None:
    found = rollout({"a": ["python_env"], "b": ["nvidia_driver"]})
    assert actions.batch_roles(found, ["a", "b"], all_roles=False) == ("nvidia_driver", "python_env")
    assert actions.batch_roles(found, ["a"], all_roles=False) == ("python_env",)


def test_all_roles_or_a_host_without_roles_runs_the_whole_playbook() -> None:
    found = rollout({"a": ["python_env"], "b": []})
    assert actions.batch_roles(found, ["a"], all_roles=True) == ()
    assert actions.batch_roles(found, ["a", "b"], all_roles=False) == ()


def test_a_host_lost_mid_batch_fails_as_unreachable_and_the_others_by_their_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSH lost while the batch is applied: the run's summary says which host was unreachable and which
    failed a task; each host fails with its own reason (the rollout leaves both drained)."""
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path))
    run = tmp_path / "runs" / "20261127-010000-000001"
    run.mkdir(parents=True)
    hosts = {
        "node2": {"unreachable": 1},
        "node3": {"failed": 1, "failed_tasks": [{"task": "nvidia_driver : Install the driver"}]},
        "node4": {"ok": 40},
    }
    (run / "summary.json").write_text(
        json.dumps({"verb": "upgrade", "limit": "node2,node3,node4", "hosts": hosts})
    )
    failed = actions._failed_hosts(["node2", "node3", "node4"], "2 host(s) failed")
    assert failed == {
        "node2": f"bootstrap: unreachable (run {run.name})",
        "node3": f"bootstrap: task 'nvidia_driver : Install the driver' failed (run {run.name})",
    }
