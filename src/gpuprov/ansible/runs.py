"""Run directories: one per run under <state dir>/runs/<timestamp-id>/, the oldest rotated away.

A run directory holds ansible-runner's artifacts (stdout: the full Ansible log; job_events/: every event as
JSON; command, rc, status), gpuprov's own log of the run (gpuprov.log) and summary.json. Every verb's runs
share the one folder; summary.json's "verb" says which verb made each (read_summary fills it in for records
written before it was there).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuprov import console, paths
from gpuprov.errors import EnvironmentProblem

KEEP_RUNS = 20
# A run directory is mostly job_events/, one file per event: a 2-host sandbox run measured 5.5 MB and 1,314
# files (about 2.7 MB and 650 files a host; real package output is larger). Checked before a run starts.
ROOM_MB = 20
ROOM_MB_PER_HOST = 4
ROOM_FILES = 100
ROOM_FILES_PER_HOST = 1000
SUMMARY = "summary.json"
LOG = "gpuprov.log"
VERB = "verb"  # summary.json's key for the verb that made the run


def runs_dir() -> Path:
    return paths.state_dir() / "runs"


def room_needed(host_count: int) -> tuple[int, int]:
    """The MB and the files (inodes) a run on host_count hosts needs free in the state dir."""
    return ROOM_MB + ROOM_MB_PER_HOST * host_count, ROOM_FILES + ROOM_FILES_PER_HOST * host_count


_last_made = datetime.datetime.min


def new_run_id() -> str:
    """A run's directory name, "YYYYmmdd-HHMMSS-" and six hex digits: the microsecond (five) and one random
    digit. Names sort in the order runs were made, so the newest run is the greatest name even for two runs
    in one second (find_prior and rotate order by name); one process never makes one microsecond twice."""
    global _last_made
    # A clock that steps back (NTP) or two calls in one microsecond: one past the last, not a repeat.
    now = max(datetime.datetime.now(), _last_made + datetime.timedelta(microseconds=1))
    _last_made = now
    return f"{now:%Y%m%d-%H%M%S}-{now.microsecond:05x}{secrets.randbelow(16):x}"


class RunDir:
    def __init__(self, run_id: str | None = None) -> None:
        self.id = run_id or new_run_id()
        self.root = runs_dir()
        self.path = self.root / self.id
        self._log_lost = False
        # Event data and logs can hold host details and -e variable names: the user's alone, whatever
        # the umask (files 0600, directories 0700; runner's own files are made 0600 by close()).
        try:
            with private_files():
                self.root.mkdir(parents=True, exist_ok=True)
                os.chmod(self.root, 0o700)
                self.path.mkdir(exist_ok=False)
                self._log = open(self.path / LOG, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        except OSError as exc:  # no half-made run directory left behind
            shutil.rmtree(self.path, ignore_errors=True)
            raise _unwritable(self.path, exc) from None

    def log(self, line: str) -> None:
        """One line of gpuprov.log. A disk that fills during the run costs the log, not the run (the
        hosts are mid-task): one warning, and Ansible's own log goes on where it can."""
        if self._log_lost:
            return
        stamp = datetime.datetime.now().strftime("%H:%M:%S")
        try:
            self._log.write(f"{stamp} {line}\n")
            self._log.flush()
        except OSError as exc:
            self._log_lost = True
            console.warning(f"cannot write {self.path / LOG}: {exc.strerror or exc}; the run goes on")

    def write_summary(self, summary: dict[str, Any]) -> Path:
        target = self.path / SUMMARY
        tmp = target.with_suffix(".tmp")
        try:
            with private_files():
                tmp.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise _unwritable(target, exc) from None
        return target

    def close(self) -> None:
        with contextlib.suppress(OSError):  # what could not be flushed was warned about in log()
            self._log.close()
        seal(self.path)
        rotate(self.root, keep=KEEP_RUNS, current=self.id)


def _unwritable(path: Path, exc: OSError) -> EnvironmentProblem:
    return EnvironmentProblem(
        f"cannot write {path}: {exc.strerror or exc}; free some room in the state dir {paths.state_dir()} "
        "or make it writable"
    )


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files and directories made inside are the user's alone (umask 077); the umask is restored after."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def seal(path: Path) -> None:
    """Directories 0700 and files 0600 under path: runner wrote its artifacts with the caller's umask (the
    0700 run directory kept others out meanwhile). Symbolic links are left alone."""
    for folder, dirs, files in os.walk(path):
        for name, mode in [*((d, 0o700) for d in dirs), *((f, 0o600) for f in files)]:
            target = os.path.join(folder, name)
            if not os.path.islink(target):  # chmod would change the file the link points at
                with contextlib.suppress(OSError):
                    os.chmod(target, mode)


def read_summary(path: Path, *, legacy_verb: str) -> dict[str, Any]:
    """summary.json of the run directory `path`, "verb" always set. A record written before records named
    their verb reads as `legacy_verb`: the caller knows which verb ran playbooks then."""
    data = json.loads((path / SUMMARY).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path / SUMMARY}: not a JSON object")
    data.setdefault(VERB, legacy_verb)
    return data


def rotate(root: Path, keep: int, current: str) -> list[Path]:
    """Remove the oldest run directories beyond `keep` (never the current one); returns what was removed."""
    if not root.is_dir():
        return []
    runs = sorted((p for p in root.iterdir() if p.is_dir() and p.name != current), key=lambda p: p.name)
    excess = len(runs) + 1 - keep
    removed = []
    for old in runs[: max(0, excess)]:
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old)
    return removed
