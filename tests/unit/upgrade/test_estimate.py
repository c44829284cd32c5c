"""The time left before a rollout's first batch is done: from earlier rollouts' per-host phase records in
the state dir, else a stated guess (gpuprov.upgrade.estimate, progress.Reporter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.errors import ExitCode
from gpuprov.upgrade import estimate, rollout, state
from gpuprov.upgrade.progress import Reporter
from tests.unit.upgrade.fake_cluster import FakeSlurm, Work, new_rollout, steps

REBOOT = {"changes": {"reboot": True}}


def _entry(drain: float, apply: float, gate: float) -> dict[str, object]:
    return {
        **REBOOT,
        "started": {
            state.DRAINING: 1000.0,
            state.APPLYING: 1000.0 + drain,
            state.GATING: 1000.0 + drain + apply,
        },
    }


def test_with_no_record_each_batch_is_the_stated_guess() -> None:
    hosts = {"a": REBOOT, "b": REBOOT, "c": {"changes": {"reboot": False}}}
    found, basis = estimate.batches([["a"], ["b", "c"]], hosts, [], "full")
    assert found == [60 + 900 + 300, 60 + 900 + 300]  # a batch lasts as long as its slowest host
    assert basis == "a guess: no earlier rollout of this inventory is recorded"
    assert estimate.batches([["c"]], hosts, [], "quick")[0] == [60 + 300 + 60]


def test_records_of_earlier_rollouts_the_hosts_own_first_then_every_hosts_median(tmp_path: Path) -> None:
    for host, seconds in (("a", (30, 400, 200)), ("a", (40, 600, 220)), ("b", (20, 500, 100))):
        estimate.append(tmp_path, estimate.host_record(host, _entry(*seconds), "full", 1000.0 + sum(seconds)))
    with (tmp_path / estimate.HISTORY).open("a") as handle:
        handle.write('{"host": "c", "phas')  # cut by a crash mid-write
    history = estimate.load(tmp_path)
    assert len(history) == 3 and history[0]["phases"] == {
        "draining": 30.0,
        "applying+reboot": 400.0,
        "gating:full": 200.0,
    }
    found, basis = estimate.batches([["a"], ["c"]], {"a": REBOOT, "c": REBOOT}, history, "full")
    assert found == [35 + 500 + 210, 30 + 500 + 200]  # a: its own medians; c: every host's
    assert basis == "from 3 host record(s) of earlier rollouts"
    found, basis = estimate.batches([["a"]], {"a": REBOOT}, history, "quick")
    assert found == [35 + 500 + 60] and basis.startswith("partly from 3 host record(s)")


def test_the_line_says_the_estimate_then_this_rollouts_own_batches_take_over(tmp_path: Path) -> None:
    cluster = FakeSlurm(["node1", "node2", "node3"])
    work = Work(cluster)
    real_apply = work.apply

    def slow_apply(names: list[str]) -> dict[str, str]:
        cluster.now += 100.0
        return real_apply(names)

    work.apply = slow_apply  # type: ignore[method-assign]
    events = Reporter(False, 3, "r1", ([600.0, 600.0, 600.0], "a guess: no earlier rollout"))
    done = new_rollout(tmp_path, [["node2"], ["node3"], ["node1"]], cluster)
    assert rollout.run(done, steps(cluster, work), events) == ExitCode.OK
    batches = [e for e in events.events if e["event"] == "batch"]
    assert [(b["eta_s"], b["eta_basis"]) for b in batches] == [
        (1800, "a guess: no earlier rollout"),
        (200, "from this rollout's batches"),
        (100, "from this rollout's batches"),
    ]
    assert sorted(r["host"] for r in estimate.load(tmp_path)) == ["node1", "node2", "node3"]


def test_a_resumed_rollout_counts_only_the_batches_left(tmp_path: Path) -> None:
    events = Reporter(False, 3, "r1", ([100.0, 200.0, 300.0], "from 3 host record(s) of earlier rollouts"))
    events.batch(3, 3, ["node1"])
    assert events.events[-1]["eta_s"] == 300


@pytest.mark.parametrize("phases", [{}, {state.DRAINING: 1.0}])
def test_a_host_whose_phases_were_not_all_seen_leaves_no_record(phases: dict[str, float]) -> None:
    assert estimate.host_record("a", {"started": phases}, "full", 5.0) is None
