"""The rollout's plan: canary, batches, the controller last, downgrades refused (gpuprov.upgrade.plan)."""

from __future__ import annotations

import json

import pytest

from gpuprov import lock_changes
from gpuprov.errors import BadInput
from gpuprov.upgrade import plan
from gpuprov.upgrade.options import UPGRADE
from tests.unit.upgrade.locks import LOCK_A, LOCK_B, VERIFIED_A, VERIFIED_B


def test_canary_then_batches_then_the_controller_alone() -> None:
    names = [f"n{i}" for i in range(1, 8)]
    assert plan.batches(names, canary=1, per_batch=2, last="n1") == [
        ["n2"], ["n3", "n4"], ["n5", "n6"], ["n7"], ["n1"],
    ]  # fmt: skip
    assert plan.batches(names, canary=0, per_batch=3, last=None) == [
        ["n1", "n2", "n3"],
        ["n4", "n5", "n6"],
        ["n7"],
    ]


@pytest.mark.parametrize(
    ("given", "total", "hosts"), [("2", 8, 2), ("25%", 8, 2), ("10%", 8, 1), ("100%", 3, 3)]
)
def test_max_unavailable_is_a_count_or_a_percent(given: str, total: int, hosts: int) -> None:
    opts = UPGRADE.build({"lock": "b.yml", "inventory": "inv.ini", "max_unavailable": given})
    assert opts.max_unavailable.hosts(total) == hosts


@pytest.mark.parametrize("given", ["0", "0%", "101%", "two", "-1"])
def test_a_bad_max_unavailable_is_one_line(given: str) -> None:
    with pytest.raises(BadInput, match="--max-unavailable"):
        UPGRADE.build({"lock": "b.yml", "inventory": "inv.ini", "max_unavailable": given})


@pytest.mark.parametrize(("given", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("2h", 7200)])
def test_durations(given: str, seconds: float) -> None:
    opts = UPGRADE.build({"lock": "b.yml", "inventory": "inv.ini", "drain_timeout": given})
    assert opts.drain_timeout == seconds


def test_hosts_already_at_the_new_lock_are_left_out() -> None:
    changes = {
        "n1": lock_changes.host_changes("n1", LOCK_A, LOCK_B, VERIFIED_A),
        "n2": lock_changes.host_changes("n2", LOCK_A, LOCK_B, VERIFIED_B),
        "n3": lock_changes.host_changes("n3", LOCK_A, LOCK_B, None),
    }
    made = plan.make(changes, canary=1, per_batch=1, controller="n1")
    assert made.batches == [["n3"], ["n1"]] and made.unchanged == ["n2"] and made.canary
    rows = plan.lines(made)
    assert rows[0][:2] == ["canary", "n3"] and rows[-1][:2] == ["-", "n2"]
    assert json.loads(plan.as_json(made, "n1"))["batches"] == [["n3"], ["n1"]]


def test_a_downgrade_needs_the_flag() -> None:
    changes = {"n1": lock_changes.host_changes("n1", LOCK_B, LOCK_A, VERIFIED_B)}
    with pytest.raises(
        BadInput, match=r"n1: driver would go from 570.124.06 down to 550.127.08 \(and 2 more\)"
    ):
        plan.refuse_downgrades(changes, allowed=False)
    plan.refuse_downgrades(changes, allowed=True)
