"""A Slurm job's end after slurmctld forgets it: sacct's output (recorded from Debian 12's real Slurm 22.05.8
with slurmdbd and MariaDB, tests/recorded/slurm/), and what `gpuprov jobs` and `gpuprov stop` make of it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuprov.launch import jobs, slurm
from gpuprov.launch.schedulers import slurm_accounting

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "slurm"


def recorded(name: str) -> str:
    return (RECORDED / f"{name}-22.05.8").read_text()


@pytest.mark.parametrize(
    ("name", "slurm_id", "state", "code"),
    [
        ("sacct-allocation-completed", "3", "COMPLETED", 0),
        ("sacct-allocation-failed", "4", "FAILED", 3),
        # cancelled while running: Slurm gives the allocation 0:0 (its batch step 0:15)
        ("sacct-allocation-cancelled", "5", "CANCELLED", 0),
    ],
)
def test_an_accounted_end(name: str, slurm_id: str, state: str, code: int) -> None:
    end = slurm_accounting.parse(slurm_id, 0, recorded(name), "")
    assert isinstance(end, slurm_accounting.Ended)
    parsed = slurm.parse_job(f"JobState={end.state} ExitCode={end.exit_code}")
    assert (parsed.state, parsed.exit_code, parsed.final) == (state, code, True)


def test_sacct_without_accounting_says_so() -> None:
    assert slurm_accounting.parse("7", 1, "", recorded("sacct-no-accounting")) == slurm_accounting.NotKnown(
        "no accounting"
    )


def test_a_job_accounting_never_saw() -> None:
    unknown = recorded("sacct-allocation-unknown")
    assert slurm_accounting.parse("999", 0, unknown, "") == slurm_accounting.NotKnown("not in accounting")


def test_slurmdbd_that_does_not_answer_is_named() -> None:
    end = slurm_accounting.parse(
        "7", 1, "", "sacct: error: Problem talking to the database: Connection refused\n"
    )
    assert end == slurm_accounting.NotKnown(
        "accounting did not answer: sacct: error: Problem talking to the database: Connection refused"
    )


def test_the_window_starts_a_day_before_the_submission() -> None:
    command = slurm_accounting.command("12", 1_764_201_600.0)  # 2025-11-27 00:00 UTC
    assert "--starttime 2025-11-26 " in command and "--jobs 12 " in command


class FakeJob:
    def __init__(self, state: str = jobs.RUNNING) -> None:
        self.id, self.slurm_job_id, self.slurm_controller = "20261126-230000-abcd", "7", "node1"
        self.state, self.created, self.ended = state, 0.0, None
        self.hosts = [SimpleNamespace(name="node1")]

    def finish(self, state: str, codes: dict[str, int | None]) -> None:
        self.state, self.ended = state, codes

    def mark(self, state: str) -> bool:
        self.state = state
        return True


@pytest.fixture
def slurm_says(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[slurm.SlurmState]]:
    """The states job_state returns, in turn; scancel is recorded as a state of its own."""
    answers: list[slurm.SlurmState] = []

    @contextlib.contextmanager
    def connected(host: Any) -> Iterator[object]:
        yield object()

    monkeypatch.setattr(slurm, "_connected", connected)
    monkeypatch.setattr(slurm, "_controller", lambda job: None)
    monkeypatch.setattr(slurm, "job_state", lambda ctl, slurm_id, submitted=0.0: answers.pop(0))
    yield answers


def test_jobs_shows_a_forgotten_job_without_accounting_as_unknown(slurm_says: list[slurm.SlurmState]) -> None:
    slurm_says.append(slurm.SlurmState("UNKNOWN", "no accounting", None, None))
    job = FakeJob()
    _, shown = slurm.refresh(job)  # type: ignore[arg-type]
    assert shown == "unknown, no accounting (slurm 7)"
    assert job.state == jobs.RUNNING and job.ended is None  # nothing recorded: its end is not known


def test_jobs_records_the_end_accounting_has(slurm_says: list[slurm.SlurmState]) -> None:
    slurm_says.append(slurm.parse_job("JobState=FAILED ExitCode=3:0"))
    job = FakeJob()
    _, shown = slurm.refresh(job)  # type: ignore[arg-type]
    assert (shown, job.state, job.ended) == ("failed (slurm 7: failed)", "failed", {"node1": 3})


def test_stop_does_not_record_stopped_for_a_forgotten_job(
    slurm_says: list[slurm.SlurmState], monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm_says.append(slurm.SlurmState("UNKNOWN", "no accounting", None, None))
    monkeypatch.setattr(slurm, "cancel", lambda job, ctl: pytest.fail("scancel of a job Slurm forgot"))
    job = FakeJob()
    slurm.stop(job)  # type: ignore[arg-type]
    assert job.state == jobs.RUNNING and job.ended is None


def test_stop_of_a_job_that_completed_records_its_end(
    slurm_says: list[slurm.SlurmState], monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm_says.append(slurm.parse_job("JobState=COMPLETED ExitCode=0:0"))
    monkeypatch.setattr(slurm, "cancel", lambda job, ctl: pytest.fail("scancel of a job that has ended"))
    job = FakeJob()
    slurm.stop(job)  # type: ignore[arg-type]
    assert job.state == "succeeded"
