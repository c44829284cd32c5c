"""A state directory gpuprov cannot write, or without room: found before any host is contacted.

check, launch, bootstrap and `sandbox up` write into the state dir (results, job records, run directories,
sandbox keys). Each checks first that it can write there and that there is room, and ends with one line and
exit 3 (this machine lacks something gpuprov needs) before it contacts a host or starts a container: the
conftest's hosts refuse every connection, so a verb that reached one would exit 1 or 6 instead.

The tests run as root, for whom a directory's mode bits do not stop a write: the unwritable places here are
ones the kernel refuses to root too (sysfs and procfs take no new files), and a full disk is os.statvfs
reporting no room. A write that fails anyway (the disk fills during the run) leaves no temporary file and
no half-made record behind.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuprov import paths
from gpuprov.ansible import runs
from gpuprov.errors import EnvironmentProblem, ExitCode
from gpuprov.launch import jobs
from gpuprov.sandbox import docker
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error

SAMPLE = Path(__file__).resolve().parents[3] / "inventory" / "sample"

UNWRITABLE = {
    "cannot be made (sysfs)": "/sys/gpuprov-test-state",
    "exists, takes no files (sysfs)": "/sys",
    "cannot be made (procfs)": "/proc/gpuprov-test-state",
}

VERBS = {
    "check": ["check", "inventory.ini"],
    "launch": ["launch", "-i", "inventory.ini", "train.py"],
    "launch --detach": ["launch", "-i", "inventory.ini", "--detach", "train.py"],
    "bootstrap": ["bootstrap", "inventory.ini"],
    "sandbox up": ["sandbox", "up", "--nodes", "1", "--name", "sd28"],
}


@pytest.fixture
def locked(work: Path) -> Path:
    """The conftest's two unreachable hosts, with the sample lock and settings beside them."""
    (work / "group_vars" / "all").mkdir(parents=True)
    shutil.copy(SAMPLE / "group_vars" / "all" / "gpu_stack.yml", work / "group_vars" / "all")
    return work


@pytest.fixture(autouse=True)
def no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sandbox up` that got past the state dir would start containers: it fails here instead."""

    def refuse() -> None:
        raise AssertionError("sandbox up reached Docker before it checked the state dir")

    monkeypatch.setattr(docker, "ensure_engine", refuse)


def _refused(args: list[str], cwd: Path, state: str | Path) -> str:
    result = in_process.gpuprov(*args, cwd=cwd, env={"GPUPROV_STATE_DIR": str(state)})
    line = one_error(result, ExitCode.ENVIRONMENT)
    assert f"state dir {state}" in line, line
    return line


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's sysfs")
@pytest.mark.parametrize("state", UNWRITABLE.values(), ids=UNWRITABLE.keys())
@pytest.mark.parametrize("verb", VERBS.values(), ids=VERBS.keys())
def test_an_unwritable_state_dir_is_found_before_any_host(verb: list[str], state: str, locked: Path) -> None:
    line = _refused(verb, locked, state)
    assert "cannot be written" in line and "GPUPROV_STATE_DIR" in line, line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a directory whatever its mode")
@pytest.mark.parametrize("verb", VERBS.values(), ids=VERBS.keys())
def test_a_read_only_state_dir_is_found_before_any_host(verb: list[str], locked: Path) -> None:
    state = locked / "state"
    state.mkdir(mode=0o500)
    assert "cannot be written" in _refused(verb, locked, state)


@pytest.mark.parametrize("verb", VERBS.values(), ids=VERBS.keys())
def test_a_full_state_dir_is_found_before_any_host(
    verb: list[str], locked: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.statvfs

    def full(path: Any) -> Any:
        found = real(path)
        return os.statvfs_result((*found[:4], 0, *found[5:]))  # f_bavail: no block left for the user

    monkeypatch.setattr(os, "statvfs", full)
    line = _refused(verb, locked, locked / "state")
    assert "free" in line and "MB" in line, line


@pytest.mark.parametrize("blank", [" ", "\t", "  \n"], ids=["space", "tab", "blanks and newline"])
@pytest.mark.parametrize("verb", VERBS.values(), ids=VERBS.keys())
def test_a_blank_state_dir_variable_is_refused_and_makes_nothing(
    verb: list[str], blank: str, locked: Path
) -> None:
    # Path(" ") would be a directory named by the blanks in the current directory.
    before = sorted(p.name for p in locked.iterdir())
    result = in_process.gpuprov(*verb, cwd=locked, env={"GPUPROV_STATE_DIR": blank})
    line = one_error(result, ExitCode.BAD_INPUT)
    assert "GPUPROV_STATE_DIR is blank" in line, line
    assert sorted(p.name for p in locked.iterdir()) == before


def test_a_state_dir_with_room_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    assert paths.writable_state_dir("launch", need_mb=1) == tmp_path / "state"
    assert os.listdir(tmp_path) == []  # the probe file is gone, and nothing was made
    (tmp_path / "state").mkdir()
    assert paths.writable_state_dir("launch", need_mb=1) == tmp_path / "state"
    assert os.listdir(tmp_path / "state") == []


def _job() -> jobs.Job:
    host = jobs.JobHost("node1", "192.0.2.10", 22, "u", None, "/kh", "/usr/bin/python3", 0, 1)
    return jobs.Job(
        id=jobs.new_id(),
        script="train.py",
        args=[],
        hosts=[host],
        master="192.0.2.10:29500",
        detach=False,
        grace_s=10.0,
        state=jobs.STARTING,
    )


def _no_room(*args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_job_record_that_cannot_be_written_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    job = _job()
    monkeypatch.setattr(jobs.os, "replace", _no_room)
    with pytest.raises(EnvironmentProblem) as info:
        job.save()
    assert info.value.message.startswith(f"cannot write the record of job {job.id}"), info.value.message
    assert "No space left on device" in info.value.message
    assert not job.local_dir.exists()  # no .job.json.tmp that `gpuprov jobs` would list as damaged
    assert jobs.all_jobs() == ([], [])


def test_a_job_record_update_that_fails_keeps_the_last_good_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    job = _job()
    job.save()
    monkeypatch.setattr(jobs.os, "replace", _no_room)
    with pytest.raises(EnvironmentProblem):
        job.mark(jobs.RUNNING)
    assert sorted(p.name for p in job.local_dir.iterdir()) == [".lock", "job.json"]
    assert jobs.load(job.id).state == jobs.STARTING


def test_a_run_directory_that_cannot_be_written_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(runs, "open", _no_room, raising=False)
    with pytest.raises(EnvironmentProblem) as info:
        runs.RunDir()
    assert "No space left on device" in info.value.message
    assert list(runs.runs_dir().iterdir()) == []


def test_a_summary_that_cannot_be_written_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    directory = runs.RunDir()
    monkeypatch.setattr(runs.os, "replace", _no_room)
    with pytest.raises(EnvironmentProblem):
        directory.write_summary({"status": "ok"})
    directory.close()
    assert sorted(p.name for p in directory.path.iterdir()) == [runs.LOG]


def test_check_results_that_cannot_be_written_are_still_shown_and_leave_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuprov.check import store

    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(store.os, "replace", _no_room)
    assert store.save({"exit_code": 1, "results": []}) is None
    assert "the results were not saved" in capsys.readouterr().err
    assert list(store.checks_dir().iterdir()) == []


class _FullFile:
    """A log file on a disk that filled after it was opened."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def close(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_run_log_that_fills_the_disk_warns_once_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    directory = runs.RunDir()
    directory._log.close()
    monkeypatch.setattr(directory, "_log", _FullFile())
    for n in range(3):
        directory.log(f"task {n}")  # the hosts' work is under way: it must not end in a traceback
    directory.close()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "gpuprov.log" in line]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], warnings


# ----- bootstrap's room grows with the hosts it targets (after --limit) --------------------------------


def _statvfs_with(monkeypatch: pytest.MonkeyPatch, free_mb: int, free_files: int, files: int = 10**6) -> None:
    """os.statvfs as the real one, but with free_mb MB and free_files inodes left for the user."""
    real = os.statvfs

    def faked(path: Any) -> Any:
        found = real(path)
        blocks = free_mb * 2**20 // found.f_frsize
        return os.statvfs_result((*found[:4], blocks, files, free_files, free_files, *found[8:]))

    monkeypatch.setattr(os, "statvfs", faked)


@pytest.fixture
def many(work: Path) -> Path:
    """An inventory of 64 hosts, every connection refused at once (closed ports on 127.0.0.1)."""
    lines = [f"node{n} ansible_host=127.0.0.1 ansible_port={n}" for n in range(1, 65)]
    (work / "many.ini").write_text("[gpu_nodes]\n" + "\n".join(lines) + "\n")
    return work


def test_bootstrap_of_64_hosts_with_100_mb_free_is_refused(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _statvfs_with(monkeypatch, free_mb=100, free_files=10**6)
    line = _refused(["bootstrap", "many.ini"], many, many / "state")
    assert "has 100 MB free, bootstrap needs 276 MB for 64 host(s)" in line, line
    assert not (many / "state").exists()  # refused before a run directory or any host


def test_bootstrap_of_one_host_with_100_mb_free_passes_the_state_dir(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _statvfs_with(monkeypatch, free_mb=100, free_files=10**6)
    # --limit leaves one host: 24 MB and 1,100 files are enough; preflight then finds the closed port.
    result = in_process.gpuprov(
        "bootstrap", "many.ini", "--limit", "node1", cwd=many, env={"GPUPROV_STATE_DIR": str(many / "state")}
    )
    assert result.returncode not in (0, ExitCode.ENVIRONMENT), result.stderr
    assert "state dir" not in result.stderr and (many / "state" / "runs").is_dir(), result.stderr


def test_bootstrap_with_too_few_free_inodes_is_refused(locked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _statvfs_with(monkeypatch, free_mb=10_000, free_files=1_500)  # 2 hosts need 2,100
    line = _refused(["bootstrap", "inventory.ini"], locked, locked / "state")
    assert "room for 1500 more files (inodes), bootstrap needs 2100 for 2 host(s)" in line, line


def test_a_file_system_without_an_inode_table_is_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    _statvfs_with(monkeypatch, free_mb=1000, free_files=0, files=0)  # btrfs: f_files and f_favail are 0
    assert paths.writable_state_dir("bootstrap", need_mb=24, need_files=1100) == tmp_path / "state"
