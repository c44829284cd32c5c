"""The rollout's state in the state dir: the plan, each host's phase, who drained what; written after every
step (whole, through a rename), and held by one process at a time (an flock the kernel drops when the
process dies, so a killed controller leaves no stale lock behind).

<state dir>/upgrades/<inventory key>/rollout.json   the rollout (see Rollout)
                                     gpu_stack.yml  the new lock, as the roles and the gate read it (-e @)
                                     lock           the flock of the process running the rollout
                                     history.jsonl  each finished host's phase times, of every rollout
                                                    (estimate.py: the time left of the next)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

from gpuprov import hosts, paths
from gpuprov.ansible import runs
from gpuprov.errors import EnvironmentProblem, ExitCode, GpuprovError

ROLLOUT = "rollout.json"
LOCK_FILE = "gpu_stack.yml"
# A host's phases, in order; a rollout resumed later redoes the phase a host was in (each is safe to redo).
PENDING, DRAINING, APPLYING, GATING, DONE, FAILED, UNCHANGED = (
    "pending", "draining", "applying", "gating", "done", "failed", "unchanged",
)  # fmt: skip
FINISHED = (DONE, UNCHANGED)


def rollout_dir(inventory: Path) -> Path:
    key = hashlib.sha256(str(inventory.resolve()).encode()).hexdigest()[:16]
    return paths.state_dir() / "upgrades" / key


class Rollout:
    """rollout.json: {"id", "inventory", "lock", "plan": [[host, ...], ...], "controller", "status",
    "hosts": {host: {"phase", "batch", "node", "drained_by_us", "admin_drained", "admin_reason", "error",
    "started": {phase: epoch s}, "changes": {...}, "killed": [jobs --kill-jobs cancelled], "gate_peer",
    "down_drained": a down node gpuprov drained for its upgrade, never resumed, "gate_peer_node": the peer
    drained for this host's gate, until it is resumed}},
    "unchanged": {host already at the lock: its node (a gate peer)}}."""

    def __init__(self, directory: Path, data: dict[str, Any]) -> None:
        self.directory = directory
        self.data = data

    @property
    def path(self) -> Path:
        return self.directory / ROLLOUT

    @property
    def lock_file(self) -> Path:
        return self.directory / LOCK_FILE

    def host(self, name: str) -> dict[str, Any]:
        entry: dict[str, Any] = self.data["hosts"][name]
        return entry

    def set(self, name: str, **values: Any) -> None:
        self.host(name).update(values)
        self.save()

    def failures(self) -> list[str]:
        return [name for name, entry in self.data["hosts"].items() if entry["phase"] == FAILED]

    def save(self) -> None:
        self.data["updated"] = time.time()
        tmp = self.path.with_suffix(".tmp")
        try:
            with runs.private_files():
                tmp.write_text(json.dumps(self.data, indent=1) + "\n")
            os.replace(tmp, self.path)
        except OSError as exc:
            raise EnvironmentProblem(
                f"cannot write the rollout's state {self.path}: {exc.strerror or exc}; the hosts keep the "
                "phase they reached: free room in the state dir, then run `gpuprov upgrade --resume`"
            ) from None


def load(inventory: Path) -> Rollout | None:
    directory = rollout_dir(inventory)
    try:
        data = json.loads((directory / ROLLOUT).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise GpuprovError(
            f"the rollout state {directory / ROLLOUT} cannot be read ({exc}); move it away to start over",
            ExitCode.BAD_INPUT,
        ) from None
    return Rollout(directory, data)


def create(inventory: Path, data: dict[str, Any], stack: dict[str, Any]) -> Rollout:
    directory = rollout_dir(inventory)
    with runs.private_files():
        directory.mkdir(parents=True, exist_ok=True)
        (directory / LOCK_FILE).write_text(yaml.safe_dump({hosts.LOCK_VARIABLE: stack}, sort_keys=False))
    rollout = Rollout(directory, data)
    rollout.save()
    return rollout


@contextlib.contextmanager
def held(inventory: Path) -> Iterator[None]:
    """This process alone rolls out this inventory; a second `gpuprov upgrade` of it is refused (exit 4)."""
    directory = rollout_dir(inventory)
    with runs.private_files():
        directory.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = open(directory / "lock", "a+", encoding="utf-8")  # noqa: SIM115 (closed below)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise GpuprovError(
                f"another gpuprov upgrade of {inventory} is running ({holder}); wait for it or stop it, "
                "then run `gpuprov upgrade --resume`",
                ExitCode.CONFLICT,
            ) from None
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        yield
    finally:
        handle.close()
