"""The rollout, batch by batch: out of service, wait for jobs, apply, gate, back in service; the state saved
after every step so that `--resume` (or a rerun after Ctrl-C or a killed controller) goes on from there.

Each phase is safe to redo: draining a drained node changes nothing, the roles converge, the gate only
reads. So a host is recorded in the phase it starts, and a resumed rollout starts that phase again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from gpuprov.errors import ExitCode, GpuprovError
from gpuprov.upgrade import estimate, peers, state
from gpuprov.upgrade.progress import Reporter
from gpuprov.upgrade.service import REASON_PREFIX, Service, state_of
from gpuprov.upgrade.state import Rollout

Apply = Callable[[list[str]], dict[str, str]]  # hosts -> {host: why it failed} (absent: applied)
# hosts, peers (outside the batch, joining its all-reduce) -> {host: the failed checks} (absent: passed)
Gate = Callable[[list[str], list[str]], dict[str, str]]
SshJobs = Callable[[list[str]], dict[str, list[str]]]  # hosts -> {gpuprov job id: its hosts among them}
StopJob = Callable[[str], None]  # a gpuprov job id -> stopped on every host (launch's `gpuprov stop`)
SLURM_JOB, GPUPROV_JOB, DRAINING = "Slurm job", "gpuprov job", "draining"


class BusyJob(NamedTuple):
    """What keeps a host busy: a Slurm job, a gpuprov job, or a node Slurm still shows draining."""

    kind: str  # SLURM_JOB, GPUPROV_JOB or DRAINING
    id: str = ""

    def __str__(self) -> str:
        return (
            "the node's last Slurm job (still draining)"
            if self.kind == DRAINING
            else f"{self.kind} {self.id}"
        )


@dataclass
class Steps:
    service: Service
    apply: Apply
    gate: Gate
    ssh_jobs: SshJobs
    drain_timeout_s: float
    max_failures: int
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    poll_s: float = 10.0
    stats: dict[str, float] = field(default_factory=dict)
    kill_jobs: bool = False  # --kill-jobs: past --drain-timeout, cancel what still runs
    stop_job: StopJob | None = None
    # After scancel: SIGTERM, SIGKILL after KillWait (30 s by default: Slurm's read_config.h), at most
    # UnkillableStepTimeout (60 s) for a stuck process, then the epilog; gpuprov's own stop waits out its
    # grace time. The jobs get this long to end.
    kill_grace_s: float = 180.0
    gate_peer: bool = False  # a one-host batch's all-reduce gets a healthy peer (the full gate)
    gate_kind: str = "full"  # --gate, as the history of phase times records it
    # After RESUME, how long Slurm gets to show the node taking jobs (slurmd answering, no drain or down of
    # its own, e.g. slurmd stopped by a missing /dev/nvidia0 in gres.conf, or fewer GPUs than configured).
    return_timeout_s: float = 120.0


def run(rollout: Rollout, steps: Steps, reporter: Reporter) -> ExitCode:
    """Every batch not yet done, in order; the exit code: 0 all done, 1 stopped at the failure budget."""
    plan: list[list[str]] = rollout.data["plan"]
    for number, batch in enumerate(plan, start=1):
        todo = [h for h in batch if rollout.host(h)["phase"] not in state.FINISHED]
        if not todo:
            continue
        started = steps.clock()
        reporter.batch(number, len(plan), todo)
        failed = _batch(rollout, steps, reporter, todo)
        reporter.batch_done(number, steps.clock() - started, failed)
        stop = _stop_reason(rollout, steps, number, failed)
        if stop:
            rollout.data["status"] = "stopped"
            rollout.save()
            reporter.stopped(stop, rollout.failures())
            return ExitCode.FAILURE
    rollout.data["status"] = "done"
    rollout.save()
    reporter.finished(rollout)
    return ExitCode.OK


def _stop_reason(rollout: Rollout, steps: Steps, number: int, failed: list[str]) -> str:
    if failed and number == 1 and rollout.data.get("canary"):
        return f"the canary failed ({', '.join(failed)}): no other host was touched"
    total = rollout.failures()
    if len(total) >= steps.max_failures:
        return f"{len(total)} host(s) failed, the budget is --max-failures {steps.max_failures}"
    return ""


def _batch(rollout: Rollout, steps: Steps, reporter: Reporter, todo: list[str]) -> list[str]:
    """One batch; returns the hosts that failed in it (left out of service with a reason)."""
    failed: dict[str, str] = {}
    for host in todo:
        _take_out(rollout, steps, reporter, host)
    ready = _wait_for_jobs(rollout, steps, reporter, todo, failed)
    if ready:
        _phase(rollout, reporter, ready, state.APPLYING)
        failed |= steps.apply(ready)
        applied = [h for h in ready if h not in failed]
        if applied:
            _phase(rollout, reporter, applied, state.GATING)
            try:
                found = steps.gate(applied, _gate_peer(rollout, steps, reporter, applied))
            finally:
                _release_peer(rollout, steps, applied)
            failed |= {h: f"gate: {why}" for h, why in found.items() if h in applied}
    for host in todo:
        refused = "" if host in failed else _return(rollout, steps, reporter, host)
        if refused:
            failed[host] = refused
        if host in failed:
            _fail(rollout, steps, reporter, host, failed[host])
    return [h for h in todo if h in failed]


def _gate_peer(rollout: Rollout, steps: Steps, reporter: Reporter, applied: list[str]) -> list[str]:
    """[the peer] for a one-host batch's full gate, recorded in the state; [] otherwise."""
    if not steps.gate_peer or len(applied) != 1:
        return []
    _release_peer(rollout, steps, applied)  # one a stopped rollout left drained
    chosen = peers.choose(rollout, applied, steps.service, steps.ssh_jobs)
    host = applied[0]
    if chosen is None or not _hold_peer(rollout, steps, host, chosen[1]):
        rollout.set(host, gate_peer=None)
        reporter.note(host, "gate: no healthy idle peer, so its all-reduce stays inside this host")
        return []
    peer, _node, why = chosen
    rollout.set(host, gate_peer=peer)
    reporter.note(host, f"gate: the all-reduce crosses the network with {peer} ({why}, idle)")
    return [peer]


def _hold_peer(rollout: Rollout, steps: Steps, host: str, node: str) -> bool:
    """Drain the peer's node for the gate's minute, so that no job Slurm starts there shares its GPUs with
    the test (and fails the batch's host for a reason of the peer's); False when a job got there first."""
    rollout.set(host, gate_peer_node=node)  # first: a crash between the two must not forget this drain
    steps.service.drain(node, f"{REASON_PREFIX} {rollout.data['id']}: the gate's peer for {host}")
    now = state_of(steps.service, node)
    if now is None or now.state == "drained":
        return True
    _release_peer(rollout, steps, [host])
    return False


def _release_peer(rollout: Rollout, steps: Steps, batch: list[str]) -> None:
    """Resume the peer this batch's gate drained, while the reason is still gpuprov's."""
    for host in batch:
        node = rollout.host(host).get("gate_peer_node")
        if not node:
            continue
        now = state_of(steps.service, node)
        if now is not None and now.ours:
            steps.service.resume(node)
        rollout.set(host, gate_peer_node=None)


def _phase(rollout: Rollout, reporter: Reporter, names: list[str], phase: str) -> None:
    for name in names:
        entry = rollout.host(name)
        entry.setdefault("started", {})[phase] = time.time()
        entry["phase"] = phase
    rollout.save()
    reporter.phase(names, phase)


def _take_out(rollout: Rollout, steps: Steps, reporter: Reporter, host: str) -> None:
    entry = rollout.host(host)
    _phase(rollout, reporter, [host], state.DRAINING)
    # Read again now: an administrator may have drained it since the rollout began (hours ago, perhaps), and
    # gpuprov's drain would replace their reason, so the node would later be resumed as gpuprov's.
    now = state_of(steps.service, entry["node"])
    if not entry.get("admin_drained") and now is not None and now.out_of_service and not now.ours:
        rollout.set(host, admin_drained=True, admin_reason=now.reason or now.state)
    if entry.get("admin_drained"):
        if now is not None and now.state.startswith("down"):
            # The slurm role's ReturnToService=2 gives a down node jobs as soon as its slurmd registers, in
            # the middle of its upgrade: drained too, and still never resumed by gpuprov.
            rollout.set(host, down_drained=True)
            steps.service.drain(entry["node"], f"{_reason(rollout)}; down before ({entry['admin_reason']})")
        reporter.note(host, f"already out of service by an administrator ({entry['admin_reason']}): kept so")
        return
    rollout.set(host, drained_by_us=True)  # first: a crash between the two must not forget our drain
    steps.service.drain(entry["node"], _reason(rollout))


def _busy(rollout: Rollout, steps: Steps, waiting: list[str]) -> dict[str, list[BusyJob]]:
    """What still runs on each of these hosts."""
    busy: dict[str, list[BusyJob]] = {}
    for host in waiting:
        node = rollout.host(host)["node"]
        for job in steps.service.jobs(node):
            busy.setdefault(host, []).append(BusyJob(SLURM_JOB, job))
        # squeue lists running, completing, suspended and configuring jobs; a stopped, signaling or
        # stage-out job, or an epilog still running, keeps the node "draining" until it is "drained"
        # (sinfo(1): DRAINING "will be changed to state DRAINED when the last job on it completes").
        if host not in busy and _draining(steps, node):
            busy[host] = [BusyJob(DRAINING)]
    for job, on in steps.ssh_jobs(waiting).items():
        for host in on:
            busy.setdefault(host, []).append(BusyJob(GPUPROV_JOB, job))
    return busy


def _draining(steps: Steps, node: str) -> bool:
    now = state_of(steps.service, node)
    return now is not None and now.state == "draining"


def _wait_for_jobs(
    rollout: Rollout, steps: Steps, reporter: Reporter, todo: list[str], failed: dict[str, str]
) -> list[str]:
    """The hosts whose jobs all ended within --drain-timeout; the others go to failed. A job is never
    killed, unless --kill-jobs: then, at the timeout, it is cancelled and gets kill_grace_s to end."""
    deadline = steps.clock() + steps.drain_timeout_s
    waiting, killed = list(todo), False
    while True:
        busy = _busy(rollout, steps, waiting)
        if not busy:
            return [h for h in todo if h not in failed]
        if steps.clock() >= deadline and steps.kill_jobs and not killed:
            _kill(rollout, steps, reporter, busy)
            deadline, killed = steps.clock() + steps.kill_grace_s, True
        elif steps.clock() >= deadline:
            for host, jobs in busy.items():
                failed[host] = _still_running(jobs, steps, killed)
            return [h for h in todo if h not in failed]
        else:
            reporter.waiting(_named(busy), deadline - steps.clock())
        waiting = list(busy)
        steps.sleep(steps.poll_s)


def _named(busy: dict[str, list[BusyJob]]) -> dict[str, list[str]]:
    return {host: [str(job) for job in jobs] for host, jobs in busy.items()}


def _still_running(jobs: list[BusyJob], steps: Steps, killed: bool) -> str:
    listed = ", ".join(str(job) for job in jobs)
    if killed:
        return (
            f"{listed} still running {steps.kill_grace_s:.0f} s after --kill-jobs cancelled them: "
            "see why they do not end (squeue, `gpuprov jobs`), then run `gpuprov upgrade --resume`"
        )
    return (
        f"{listed} still running after --drain-timeout ({steps.drain_timeout_s:.0f} s; never "
        "killed): when they end, run `gpuprov upgrade --resume` (or add --kill-jobs)"
    )


def _kill(rollout: Rollout, steps: Steps, reporter: Reporter, busy: dict[str, list[BusyJob]]) -> None:
    """--kill-jobs: recorded in the state and in the drain reason first, then Slurm's scancel and gpuprov's
    stop (each job ends everywhere it runs, on hosts outside the batch too: a job is one unit)."""
    for host, names in _named(busy).items():
        entry = rollout.host(host)
        rollout.set(host, killed=sorted(set(entry.get("killed") or []) | set(names)))
        if entry.get("drained_by_us"):
            steps.service.drain(
                entry["node"], f"{_reason(rollout)}; --kill-jobs cancelled {', '.join(names)}"
            )
        reporter.killing(host, names)
    listed = {job for jobs in busy.values() for job in jobs}
    steps.service.cancel(sorted(job.id for job in listed if job.kind == SLURM_JOB))
    for job in sorted(job.id for job in listed if job.kind == GPUPROV_JOB):
        try:
            if steps.stop_job is not None:
                steps.stop_job(job)
        except GpuprovError as exc:  # the wait that follows judges: still running means failed
            reporter.note(", ".join(sorted(busy)), f"stopping gpuprov job {job}: {exc.message}")


def _reason(rollout: Rollout) -> str:
    return f"{REASON_PREFIX} {rollout.data['id']}: moving to the new lock; do not resume by hand"


def _fail(rollout: Rollout, steps: Steps, reporter: Reporter, host: str, why: str) -> None:
    entry = rollout.host(host)
    rollout.set(host, phase=state.FAILED, error=why)
    if entry.get("drained_by_us") or entry.get("down_drained"):
        steps.service.drain(entry["node"], f"{REASON_PREFIX} {rollout.data['id']} failed: {why}")
    reporter.failed(host, why)


def _return(rollout: Rollout, steps: Steps, reporter: Reporter, host: str) -> str:
    """Back in service: only a node gpuprov drained, and only while the reason still is gpuprov's (an
    administrator who drained it meanwhile keeps it). "" when done; else why Slurm did not take it back."""
    entry = rollout.host(host)
    back = False
    if entry.get("drained_by_us"):
        now = state_of(steps.service, entry["node"])
        back = now is None or now.ours
        if now is None or now.ours:
            steps.service.resume(entry["node"])
            refused = _taken_back(steps, entry["node"])
            if refused:
                return refused
        else:
            reporter.note(host, f"left out of service: its reason is now {now.reason!r}, not gpuprov's")
    rollout.set(host, phase=state.DONE, drained_by_us=False, error=None)
    estimate.append(rollout.directory, estimate.host_record(host, entry, steps.gate_kind, time.time()))
    reporter.done(host, back=back or not entry.get("admin_drained"))
    return ""


def _taken_back(steps: Steps, node: str) -> str:
    """ "" once Slurm shows the resumed node taking jobs; else, after return_timeout_s, what it shows."""
    deadline = steps.clock() + steps.return_timeout_s
    while True:
        now = state_of(steps.service, node)
        if now is None or now.serving:
            return ""
        if steps.clock() >= deadline:
            shown = f"{now.state}{'' if now.responding else ' and not responding'}"
            why = f", reason {now.reason!r}" if now.reason else ""
            return (
                f"Slurm did not take it back within {steps.return_timeout_s:.0f} s of the resume: "
                f"{shown}{why}; see slurmd's log on the host (`journalctl -u slurmd`), fix it, then "
                "`gpuprov upgrade --resume`"
            )
        steps.sleep(steps.poll_s)
