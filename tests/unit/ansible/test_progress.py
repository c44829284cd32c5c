"""Progress and the time left: each role's time on each host (timing.py), the estimate from the last run
like this one (estimate.py), shown live under a pseudo-terminal and as plain lines without one, and checked
against two recorded real runs."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpuprov.ansible import engine, estimate, runs
from gpuprov.ansible.arguments import Options
from gpuprov.ansible.estimate import Estimator, Prior
from gpuprov.ansible.events import Tracker
from tests.unit.ansible import recorded_runs, runner_stand_in
from tests.unit.ansible.runner_stand_in import Events

ROOT = Path(__file__).parents[3]


def at(second: float, kind: str, **data: Any) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_800_000_000 + int(second)))
    return {"event": kind, "created": f"{stamp}.{int(second % 1 * 1e6):06d}+00:00", "event_data": data}


def task(second: float, role: str, name: str, *hosts: str, took: float = 1.0) -> list[dict[str, Any]]:
    """A task started at `second` on hosts, each result `took` seconds after."""
    events = [at(second, "playbook_on_task_start", role=role, task=name)]
    events += [at(second, "runner_on_start", host=h, role=role, task=name) for h in hosts]
    events += [at(second + took, "runner_on_ok", host=h, role=role, task=name, duration=took) for h in hosts]
    return events


def replay(events: list[dict[str, Any]], hosts: list[str], prior: Prior | None) -> tuple[Tracker, Estimator]:
    tracker = Tracker(hosts)
    estimator = Estimator(tracker.clock, hosts, prior)
    tracker.listeners.append(lambda kind, data: estimator.observe(kind, tracker.now))
    for event in events:
        tracker.handle(event)
    return tracker, estimator


RUN = [
    at(0, "playbook_on_start"),
    at(0, "playbook_on_play_start", play="Install"),
    *task(0, "driver", "Install the driver", "n1", "n2", took=30),
    *task(40, "driver", "Load the module", "n1", "n2"),
    *task(50, "cuda", "Install CUDA", "n1", "n2", took=20),
    *task(80, "repository", "Add the key", "n1"),  # n2 has it: a role that ran on one host only
    *task(90, "cuda", "Verify CUDA", "n1", "n2"),
    at(100, "playbook_on_stats"),
]


def test_each_roles_time_on_each_host() -> None:
    tracker, _ = replay(RUN, ["n1", "n2"], None)
    table = tracker.clock.table()
    assert table["n1"]["driver"] == {"seconds": 50.0, "tasks": 2}
    assert tracker.clock.timelines()["n1"][:2] == [
        ["driver", "Install the driver", 40.0, False],
        ["driver", "Load the module", 10.0, False],
    ]
    assert table["n1"]["cuda"]["seconds"] == 40.0 and table["n1"]["cuda"]["tasks"] == 2  # 30 + 10
    assert table["n1"]["repository"]["seconds"] == 10.0 and "repository" not in table["n2"]
    finished = [(f.host, f.role, f.seconds, f.tasks) for f in tracker.clock.finished]
    assert ("n1", "driver", 50.0, 2) in finished and ("n2", "cuda", 40.0, 2) in finished
    assert [f.role for f in tracker.clock.finished if f.host == "n1"] == [
        "driver",
        "cuda",
        "repository",
        "cuda",
    ]
    assert tracker.clock.slowest() in ("n1", "n2")


def test_first_run_says_there_is_no_estimate_yet() -> None:
    tracker, estimator = replay(RUN[:8], ["n1", "n2"], None)
    progress = estimator.progress(tracker.now)
    assert progress.left_s is None and progress.expected is None
    assert progress.line().startswith("2 tasks done; slowest host: ")
    assert progress.line().endswith(estimate.FIRST_RUN)


def prior_of(tracker: Tracker, run_id: str = "run-1") -> Prior:
    """The prior as the next run reads it from summary.json."""
    return Prior(run_id, estimate.parse_timeline(json.loads(json.dumps(tracker.clock.timelines()))))


def before(second: float) -> list[dict[str, Any]]:
    return [e for e in RUN if e["created"] < at(second, "x")["created"]]


def test_the_estimate_from_a_prior_run() -> None:
    prior = prior_of(replay(RUN, ["n1", "n2"], None)[0])
    # The same run again: halfway (after 50 s, CUDA's install just started) it has 50 s left.
    tracker, estimator = replay(before(50.5), ["n1", "n2"], prior)
    progress = estimator.progress(tracker.now)
    assert progress.expected == 9 and progress.done == 4  # 5 tasks on n1 and 4 on n2; 2 each done
    assert progress.left_s == pytest.approx(50.0, abs=1.0)
    assert progress.line().startswith("4/9 tasks done (44%), 5 left; slowest host: ")
    assert progress.line().endswith("about 50s left (from run run-1)")
    # A host the prior did not cover is given the tasks of its slowest host.
    assert len(prior.for_host("n9")) == 5


def test_a_rerun_that_changes_nothing_skips_the_installs() -> None:
    """The prior installed (its long tasks changed something); this run's matched installs changed nothing:
    the install left (CUDA, 30 s then) is costed as this run's idle tasks are (2 s), not 30 s."""
    first = [
        {**e, "event_data": {**e["event_data"], "res": {"changed": True}}}
        if e["event"] == "runner_on_ok" and e["event_data"]["task"].startswith("Install")
        else e
        for e in RUN
    ]
    prior = prior_of(replay(first, ["n1", "n2"], None)[0])
    rerun = [
        at(0, "playbook_on_start"),
        *task(0, "driver", "Install the driver", "n1", took=1),  # changed nothing: 1 s, not 40
        *task(1, "driver", "Load the module", "n1", took=3),  # 3 s now for 10 s then: a pace of 0.3
        at(4, "playbook_on_task_start", role="cuda", task="Install CUDA"),
    ]
    tracker, estimator = replay(rerun, ["n1"], prior)
    left = estimator.progress(tracker.now).left_s
    # Left: Install CUDA (2 s: this run's tasks that changed nothing took 1 and 3 s), Add the key and
    # Verify CUDA (10 s each then, x 0.3).
    assert left == pytest.approx(2 + 3 + 3, abs=0.1)


def test_records_that_do_not_parse_are_left_out() -> None:
    timeline = {"n1": [["a", "t", "x", False]], "n2": [["a", "t", 3, True]], "n3": [1]}
    assert estimate.parse_timeline(timeline) == {"n2": [("a", "t", 3.0, True)]}
    assert estimate.parse_timeline(None) == {}


@pytest.mark.parametrize(
    ("before", "after", "error"),
    [
        ("first", "second", -0.227),  # the first installed, the second changed nothing (and ran slower)
        ("third", "fourth", 0.026),  # two more re-runs that changed nothing
    ],
)
def test_recorded_runs_estimate_at_halfway_within_25_percent(before: str, after: str, error: float) -> None:
    """Four real bootstraps of two fresh sandbox hosts in a row (tests/recorded/bootstrap-runs/README.md).
    Estimated from the run before, a run's estimate at its halfway point is within 25% of the time it then
    had left; the error is pinned so that a change to the estimator shows what it does to it."""
    hosts = ["node1", "node2"]
    first, first_estimate = replay(recorded_runs.load(f"{before}.jsonl.gz"), hosts, None)
    assert first_estimate.accuracy(first.now) is None  # without a prior there is no estimate
    second, estimator = replay(recorded_runs.load(f"{after}.jsonl.gz"), hosts, prior_of(first, before))
    accuracy = estimator.accuracy(second.now)
    assert accuracy is not None and accuracy["error"] is not None
    assert abs(accuracy["error"]) <= 0.25, accuracy
    assert accuracy["error"] == pytest.approx(error, abs=0.002), accuracy


def test_engine_records_the_roles_and_the_next_run_estimates_from_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nn1 ansible_host=192.0.2.10\nn2 ansible_host=192.0.2.11\n")
    playbook = tmp_path / "upgrade.yml"
    playbook.write_text("- hosts: all\n  tasks: []\n")
    events: Events = [(e["event"], e["event_data"]) for e in RUN]
    runner_stand_in.install(monkeypatch, events)
    first = engine.run_playbook("upgrade", playbook, Options(inventory=inventory))
    assert first["roles"]["n1"]["driver"]["tasks"] == 2
    assert first["progress"]["estimate_from"] == estimate.FIRST_RUN
    assert first["progress"]["tasks_done"] == 9 and first["progress"]["halfway"] is None
    err = capsys.readouterr().err  # no terminal: a line per role per host as it finishes
    assert "n1: driver done in 0s (2 tasks); " in err and "n2: cuda done in " in err
    second = engine.run_playbook("upgrade", playbook, Options(inventory=inventory))
    assert second["progress"]["estimate_from"] == f"from run {first['run_id']}"
    assert second["progress"]["tasks_expected"] == 9
    assert "tasks done (" in capsys.readouterr().err
    other = engine.run_playbook("upgrade", playbook, Options(inventory=inventory, check=True))
    assert other["progress"]["estimate_from"] == estimate.FIRST_RUN  # check mode: not like the others
    limited = engine.run_playbook("upgrade", playbook, Options(inventory=inventory, limit="n1"))
    covered = {f"from run {first['run_id']}", f"from run {second['run_id']}"}  # ids order by the second only
    assert limited["progress"]["estimate_from"] in covered  # n1 was covered
    bigger = tmp_path / "bigger.ini"
    bigger.write_text(inventory.read_text() + "n3 ansible_host=192.0.2.12\n")
    third = engine.run_playbook("upgrade", playbook, Options(inventory=bigger))
    assert third["progress"]["estimate_from"] == estimate.FIRST_RUN  # no run covered n3


# A run of the engine with the stand-in runner, slow enough for the live display to draw.
LIVE_DRIVER = """
import sys, time
from pathlib import Path
from gpuprov.ansible import engine, runner
from gpuprov.ansible.arguments import Options

def execute(build_kwargs, handler, log):
    handler({"event": "playbook_on_play_start", "event_data": {"play": "Install"}})
    for name in ("Install the driver", "Load the module", "Verify"):
        data = {"role": "driver", "task": name}
        handler({"event": "playbook_on_task_start", "event_data": data})
        for host in ("n1", "n2"):
            handler({"event": "runner_on_start", "event_data": {"host": host, **data}})
        time.sleep(0.6)
        for host in ("n1", "n2"):
            handler({"event": "runner_on_ok", "event_data": {"host": host, "role": "driver", "task": name}})
    handler({"event": "playbook_on_stats", "event_data": {"ok": {"n1": 3, "n2": 3}}})
    return runner.Outcome(rc=0, status="successful", canceled=False)

runner.execute = execute
engine.run_playbook("upgrade", Path(sys.argv[2]), Options(inventory=Path(sys.argv[1])))
"""


def run_in_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What a command writes to its terminal (stderr and stdout on a pseudo-terminal)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed: the command ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=30)
    os.close(leader)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def test_live_line_under_a_terminal(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nn1 ansible_host=192.0.2.10\nn2 ansible_host=192.0.2.11\n")
    playbook = tmp_path / "upgrade.yml"
    playbook.write_text("- hosts: all\n  tasks: []\n")
    env = {**os.environ, "GPUPROV_STATE_DIR": str(tmp_path / "state"), "TERM": "xterm", "COLUMNS": "200"}
    env.pop("NO_COLOR", None)
    args = [sys.executable, "-c", LIVE_DRIVER, str(inventory), str(playbook)]
    first = run_in_a_terminal(args, env)
    assert "6 tasks done; " + estimate.FIRST_RUN in first  # the stand-in's tasks are not timed: no slowest
    assert "n1: driver done in" not in first  # plain lines are for logs, not the terminal
    second = run_in_a_terminal(args, env)
    assert "3/6 tasks done (50%)" in second or "2/6 tasks done (33%)" in second, second
    assert "left (from run " in second


def test_only_a_run_of_every_host_of_this_one_is_a_prior(tmp_path: Path) -> None:
    """Two ok records of the same verb, playbook and inventory: a 2-host run and a newer 1-host run (say a
    `--limit n1` run). A run of n1 and n2 estimates from the 2-host one; a run of 3 hosts from neither."""
    root = tmp_path / "runs"
    timeline = json.loads(json.dumps(replay(RUN, ["n1", "n2"], None)[0].clock.timelines()))
    alike = {"verb": "bootstrap", "playbook": "site.yml", "inventory_path": "/c/inventory.ini"}
    for run_id, hosts in (("20261126-100000-aaaaaa", ["n1", "n2"]), ("20261126-110000-bbbbbb", ["n1"])):
        (root / run_id).mkdir(parents=True)
        record = {**alike, "status": "ok", "timeline": {h: timeline[h] for h in hosts}}
        (root / run_id / runs.SUMMARY).write_text(json.dumps(record))
    both = estimate.find_prior(alike, "now", hosts=["n1", "n2"], root=root)
    assert both is not None and both.run_id == "20261126-100000-aaaaaa"
    one = estimate.find_prior(alike, "now", hosts=["n1"], root=root)
    assert one is not None and one.run_id == "20261126-110000-bbbbbb"  # the newest that covers n1
    assert estimate.find_prior(alike, "now", hosts=["n1", "n2", "n3"], root=root) is None
    other = {**alike, "inventory_path": "/other/inventory.ini"}  # another cluster's hosts of the same names
    assert estimate.find_prior(other, "now", hosts=["n1"], root=root) is None
    assert estimate.FIRST_RUN.startswith("no comparable run: no estimate yet")
