"""The one wrapper that owns an ansible-runner run.

It makes a private data dir in a temporary folder and always removes it (runner writes the extra variables
there, which may hold secrets), wires Ctrl-C and SIGTERM to runner's cancel_callback, streams every event
to the tracker and display, and leaves runner's artifacts in the run directory.

Cancelling: runner's own cancel kills ansible-playbook's process group with SIGKILL, but Ansible's workers
run in sessions of their own (os.setsid) and would live on, still working on hosts. So on Ctrl-C gpuprov
first sends SIGINT to ansible-playbook, which passes it to its workers and stops them (as Ctrl-C in a
terminal would); only if it has not exited after CANCEL_GRACE_S does the callback tell runner to kill it, and
gpuprov then kills every process of the run that is left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprov import interrupts
from gpuprov.errors import EnvironmentProblem

_ENV_KEPT = ("ANSIBLE_", "PATH")
CANCEL_GRACE_S = 15.0


@dataclass(frozen=True)
class Outcome:
    rc: int
    status: str  # runner's: successful, failed, canceled, timeout
    canceled: bool


def execute(
    build_kwargs: Callable[[Path], Mapping[str, Any]],
    event_handler: Callable[[Mapping[str, Any]], bool],
    log: Callable[[str], None],
) -> Outcome:
    """Run ansible-runner until done or cancelled.

    build_kwargs(private_data_dir) returns runner's arguments (arguments.runner_kwargs); the private data dir
    is a temporary folder this function makes and removes.
    """
    import ansible_runner

    from gpuprov.ansible.arguments import describe

    private_data_dir = Path(tempfile.mkdtemp(prefix="gpuprov-runner-"))
    kwargs = build_kwargs(private_data_dir)
    log("runner arguments: " + describe(kwargs))
    result: Any = None
    canceller = _Canceller()
    try:
        # Inside deferred(), Ctrl-C only sets a flag; runner polls it through cancel_callback and kills
        # ansible-playbook's process group. deferred() re-raises it as KeyboardInterrupt at its end.
        with interrupts.deferred():
            result = ansible_runner.run(**kwargs, event_handler=event_handler, cancel_callback=canceller)
    except KeyboardInterrupt:
        with interrupts.shielded():
            canceller.kill_leftovers()
        log("interrupted: " + canceller.report())
        rc = int(result.rc) if result is not None and result.rc is not None else 130
        return Outcome(rc=rc, status="canceled", canceled=True)
    except ansible_runner.AnsibleRunnerException as exc:
        raise EnvironmentProblem(f"ansible-runner could not run the playbook: {exc}") from None
    finally:
        shutil.rmtree(private_data_dir, ignore_errors=True)
        _scrub_command_file(Path(kwargs["artifact_dir"]) / str(kwargs["ident"]) / "command")
    rc = int(result.rc) if result.rc is not None else 1
    return Outcome(rc=rc, status=str(result.status), canceled=bool(result.canceled))


class _Canceller:
    """runner's cancel_callback: stop ansible-playbook as Ctrl-C in a terminal would, then by force."""

    def __init__(self) -> None:
        self.asked_at: float | None = None
        self.processes: set[int] = set()
        self.killed: list[int] = []

    def __call__(self) -> bool:
        if not interrupts.requested():
            return False
        if self.asked_at is None:
            self.asked_at = time.monotonic()
            playbooks = _children(os.getpid())
            self.processes = {p for root in playbooks for p in _descendants(root)} | set(playbooks)
            for pid in playbooks:
                _signal(pid, signal.SIGINT)
            return False
        return time.monotonic() - self.asked_at > CANCEL_GRACE_S  # True: runner kills the process group

    def kill_leftovers(self) -> None:
        """SIGKILL what is left of the run (workers live in sessions of their own)."""
        for pid in sorted(self.processes):
            if _signal(pid, signal.SIGKILL):
                self.killed.append(pid)

    def report(self) -> str:
        return f"sent SIGINT to ansible-playbook; {len(self.killed)} leftover process(es) killed"


def _signal(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _process_table() -> list[tuple[int, int]]:
    """(pid, parent pid) of every process: from /proc on Linux, else from ps."""
    table = []
    proc = Path("/proc")
    if (proc / "self" / "stat").exists():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[-1].split()
            table.append((int(entry.name), int(fields[1])))
        return table
    out = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            table.append((int(parts[0]), int(parts[1])))
    return table


def _children(pid: int) -> list[int]:
    return [child for child, parent in _process_table() if parent == pid]


def _descendants(root: int) -> set[int]:
    table = _process_table()
    found: set[int] = set()
    frontier = [root]
    while frontier:
        current = frontier.pop()
        for child, parent in table:
            if parent == current and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _scrub_command_file(path: Path) -> None:
    """runner records the whole environment of the run; keep Ansible's settings, drop the rest (secrets)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    env = data.get("env")
    if isinstance(env, dict):
        data["env"] = {k: v for k, v in env.items() if k.startswith(_ENV_KEPT)}
        path.write_text(json.dumps(data, indent=2))
