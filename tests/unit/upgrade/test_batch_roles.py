"""Which site.yml tags a batch's run gets (gpuprov.upgrade.actions.batch_roles)."""

from __future__ import annotations

from pathlib import Path

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
