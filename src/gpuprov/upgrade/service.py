"""Taking hosts out of service and returning them: Slurm through its controller, and the jobs that `gpuprov
launch` started over SSH from this machine (their records), which nothing can drain: they are waited for.

Slurm (scontrol(1), sinfo(1), squeue(1) of SchedMD's manual pages):
- `scontrol update NodeName=N State=DRAIN Reason=...`: no new job starts on N, running ones go on (DRAINING,
  then DRAINED when the last ends); `State=RESUME` returns it. Updates need SlurmUser or root: run through
  `sudo -n` unless the SSH user is root.
- `sinfo --noheader --Node --nodes=N --format '%N|%P|%n|%o|%T|%E'`: each node (once per partition) with its
  state (long form: idle, mixed, allocated, draining, drained, down; a trailing `*` when slurmd does not
  answer) and its reason (`none` when there is none); the format `gpuprov launch --scheduler slurm` reads,
  recorded from Debian 12's Slurm 22.05.8 in tests/recorded/slurm/sinfo-nodes-*.
- `squeue -h -w N -t RUNNING,COMPLETING,SUSPENDED,CONFIGURING -o %A`: the jobs on N, every user's (as root:
  PrivateData=jobs hides other users' jobs from a plain user).
- `scancel ID...` (only with --kill-jobs): Slurm sends the job's steps SIGTERM, then SIGKILL after
  slurm.conf's KillWait (30 s by default: DEFAULT_KILL_WAIT, src/common/read_config.h). A job that ended
  meanwhile: 22.05.8 says nothing and exits 0 (recorded: tests/recorded/slurm/scancel-verbose-unknown-
  job-22.05.8), older releases printed "Kill job error on job id N: Invalid job id specified" and exited
  non-zero; so its exit status is not trusted either way: squeue says what still runs. Cancelling
  another user's job needs root, SlurmUser or an operator: `sudo -n` as above.

Each inventory host's node name is Slurm's own (sinfo of every node, matched by launch's rules through
launch.api.slurm_node_names), so launch and upgrade map hosts to nodes one way.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpuprov import hosts, ssh
from gpuprov.errors import ExitCode, GpuprovError
from gpuprov.launch import api as launch_api

REASON_PREFIX = "gpuprov upgrade"
ATTEMPTS = 6
RETRY_S = 10.0
MAX_REASON = 200
_STATE_MARKS = "*~#!%$@^-"


@dataclass(frozen=True)
class NodeState:
    state: str  # sinfo's long form without its suffix marks: idle, mixed, drained, draining, down ...
    reason: str  # "" when none
    # sinfo(1)'s "*" mark: "the node is presently not responding and will not be allocated any new work".
    responding: bool = True

    @property
    def out_of_service(self) -> bool:
        # A node in a reservation ("maint", "reserved") serves the reservation's jobs: drained and resumed
        # like any other.
        return self.state.startswith(("drain", "down", "fail"))

    @property
    def ours(self) -> bool:
        return self.reason.startswith(REASON_PREFIX)

    @property
    def serving(self) -> bool:
        """Taking jobs: in service and its slurmd answering."""
        return self.responding and not self.out_of_service


def parse_sinfo(text: str) -> dict[str, NodeState]:
    """launch's SINFO_FORMAT lines (launch reads the same lines for its partition): each node's state,
    suffix marks dropped, and its reason."""
    states: dict[str, NodeState] = {}
    for _partition, node in launch_api.listed_nodes(text):
        reason = "" if node.reason.lower() == "none" else node.reason
        state = node.state.rstrip(_STATE_MARKS)
        states[node.name] = NodeState(state.lower(), reason, responding="*" not in node.state[len(state) :])
    return states


class Service(Protocol):
    def states(self, nodes: Sequence[str]) -> dict[str, NodeState]: ...
    def drain(self, node: str, reason: str) -> None: ...
    def jobs(self, node: str) -> list[str]: ...
    def resume(self, node: str) -> None: ...
    def cancel(self, jobs: Sequence[str]) -> None: ...


class Slurm:
    """Slurm's view of the nodes, through the controller host (one SSH connection, made again if lost)."""

    def __init__(self, controller: hosts.Host, sleep: Callable[[float], None] = time.sleep) -> None:
        self.controller = controller
        self.sleep = sleep
        self._client: ssh.Client | None = None
        self._sudo = "" if controller.user == "root" else "sudo -n "

    def _run(self, command: str, what: str, any_status: bool = False) -> str:
        """The command's output; tried ATTEMPTS times, RETRY_S apart: the controller host may just have
        rebooted in its own batch (SSH back before slurmctld answers). any_status: a non-zero exit is an
        answer too (scancel of a job that has just ended)."""
        last = ""
        for attempt in range(1, ATTEMPTS + 1):
            if attempt > 1:
                self.sleep(RETRY_S)
            try:
                if self._client is None:
                    self._client = ssh.connect(self.controller)
                done = ssh.run(self._client, command, timeout=60)
            except (ssh.SessionLost, ssh.Unreachable, ssh.TimedOut) as exc:
                self._client, last = None, str(exc)
                continue
            if done.rc == 0 or any_status:
                return done.stdout
            last = done.last_line
        raise GpuprovError(
            f"{what} failed on the Slurm controller {self.controller.name}: {last}; check slurmctld there, "
            "then run `gpuprov upgrade --resume`",
            ExitCode.FAILURE,
        )

    def states(self, nodes: Sequence[str]) -> dict[str, NodeState]:
        names = shlex.quote(",".join(nodes))
        command = f"sinfo --noheader --Node --nodes={names} --format '{launch_api.SLURM_SINFO_FORMAT}'"
        return parse_sinfo(self._run(command, "sinfo"))

    def drain(self, node: str, reason: str) -> None:
        text = shlex.quote(reason[:MAX_REASON])
        self._run(f"{self._sudo}scontrol update NodeName={shlex.quote(node)} State=DRAIN Reason={text}",
                  f"draining {node}")  # fmt: skip

    def jobs(self, node: str) -> list[str]:
        states = "RUNNING,COMPLETING,SUSPENDED,CONFIGURING"
        out = self._run(
            f"{self._sudo}squeue -h -w {shlex.quote(node)} -t {states} -o %A", f"squeue on {node}"
        )
        return [line.strip() for line in out.splitlines() if line.strip()]

    def resume(self, node: str) -> None:
        self._run(
            f"{self._sudo}scontrol update NodeName={shlex.quote(node)} State=RESUME", f"resuming {node}"
        )

    def cancel(self, jobs: Sequence[str]) -> None:
        if jobs:
            ids = " ".join(shlex.quote(job) for job in jobs)
            self._run(f"{self._sudo}scancel {ids}", f"scancel {ids}", any_status=True)

    def node_names(self, inventory: hosts.Inventory) -> dict[str, str]:
        """Each inventory host's Slurm node name (hosts no node is are left out)."""
        command = f"sinfo --noheader --Node --format '{launch_api.SLURM_SINFO_FORMAT}'"
        return launch_api.slurm_node_names(inventory, self._run(command, "sinfo"))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def state_of(service: Service, node: str) -> NodeState | None:
    """One node's state now (None: Slurm does not list it)."""
    return service.states([node]).get(node)


class NoScheduler:
    """Hosts without Slurm: nothing to drain; `states` says every host is in service."""

    def states(self, nodes: Sequence[str]) -> dict[str, NodeState]:
        return {node: NodeState("idle", "") for node in nodes}

    def drain(self, node: str, reason: str) -> None:
        return None

    def jobs(self, node: str) -> list[str]:
        return []

    def resume(self, node: str) -> None:
        return None

    def cancel(self, jobs: Sequence[str]) -> None:
        return None


def missing_nodes(inventory: hosts.Inventory, nodes: Mapping[str, str]) -> list[str]:
    """Hosts that no Slurm node is (launch's rules: name, NodeHostName, NodeAddr, FQDN's first label)."""
    return [name for name in inventory.names if name not in nodes]
