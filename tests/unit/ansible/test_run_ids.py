"""Run directory names: the newest run is the greatest name, even for runs made in one second."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest

from gpuprov.ansible import estimate, runs


def test_run_ids_sort_in_the_order_they_were_made() -> None:
    made = [runs.new_run_id() for _ in range(200)]
    assert all(re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", run_id) for run_id in made)
    assert sorted(made) == made
    assert len(set(made)) == len(made)


def test_a_clock_stepping_back_still_makes_a_later_name(monkeypatch: pytest.MonkeyPatch) -> None:
    first = runs.new_run_id()

    class SteppedBack(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> SteppedBack:
            return cls(2020, 1, 1)

    monkeypatch.setattr(datetime, "datetime", SteppedBack)
    assert runs.new_run_id() > first


def _record(root: Path, run_id: str, task_seconds: float) -> None:
    (root / run_id).mkdir(parents=True)
    timeline = {"node1": [["role", "task", task_seconds, False]]}
    summary = {"status": "ok", "verb": "bootstrap", "timeline": timeline}
    (root / run_id / runs.SUMMARY).write_text(json.dumps(summary))


def test_the_estimate_reads_the_run_made_last_within_one_second(tmp_path: Path) -> None:
    older, newer = runs.new_run_id(), runs.new_run_id()
    # Written in the other order, so neither the directory's age nor its position decides.
    _record(tmp_path, newer, 2.0)
    _record(tmp_path, older, 9.0)
    prior = estimate.find_prior({"verb": "bootstrap"}, current="", hosts=["node1"], root=tmp_path)
    assert prior is not None and prior.run_id == newer


def test_rotate_removes_the_runs_made_first(tmp_path: Path) -> None:
    made = [runs.new_run_id() for _ in range(4)]
    for run_id in reversed(made):
        (tmp_path / run_id).mkdir()
    removed = runs.rotate(tmp_path, keep=3, current="")
    assert [path.name for path in removed] == made[:2]
