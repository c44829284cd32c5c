"""`gpuprov launch` from options to a finished (or detached) job.

plan (options, hosts, preflight with each host's push of files into its store beside it, per-host
scripts) -> record the job -> push the job's part (on the push's channel: the job's directory, run.sh) ->
once every host has its files, the same channel starts the host's agent ->
detached: return; attached: stream, fail fast, report. Each host costs one SSH connection, opened as soon
as the hosts are chosen (connect_ahead.py, while this module loads), taken by preflight and used to the end.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from types import FrameType

from gpuprov import console, interrupts, onhost, ssh
from gpuprov.errors import GpuprovError
from gpuprov.launch import jobs, nccl_transport, preflight, push, stopping, stream
from gpuprov.launch.attached import AttachedJob
from gpuprov.launch.options import LaunchOptions
from gpuprov.launch.plan import Plan, plan


def launch(opts: LaunchOptions) -> str:
    """Run the job; return its id. GpuprovError (exit 1) when it failed; KeyboardInterrupt on Ctrl-C."""
    started = time.monotonic()
    if not opts.dry_run:
        jobs.check_room()  # before preflight connects: a record that cannot be written is found first
    the_plan = plan(opts)
    try:
        links = the_plan.payload.skipped_links
        if links:
            console.warning(
                f"not pushing {len(links)} symlink(s) of --workdir that lead outside it or to a directory "
                f"({', '.join(links[:5])}{'...' if len(links) > 5 else ''}); copy what the job needs into it"
            )
        if opts.dry_run:
            _print_dry_run(the_plan)
            return the_plan.job_id
        if the_plan.payload.skipped_large:
            console.warning(
                f"not pushing {len(the_plan.payload.skipped_large)} file(s) over {opts.max_file_mb} MB "
                f"({', '.join(the_plan.payload.skipped_large[:3])}...); --include-large sends them"
            )
        job = _record(the_plan, opts)
        deliveries = _push_all(the_plan, job, opts)
        if opts.detach:
            _start_detached(the_plan, job, deliveries)
            return job.id
        _run_attached(the_plan, job, started, deliveries)
        return job.id
    finally:
        the_plan.checks.close()


def _print_dry_run(the_plan: Plan) -> None:
    console.info(
        f"Dry run: job {the_plan.job_id} would run these commands (master {the_plan.checks.master_addr}:"
        f"{the_plan.checks.master_port}); nothing was started."
    )
    for check in the_plan.checks.checks:
        name = check.host.name
        console.result(f"# ===== {name} ({check.host.user}@{check.host.address}:{check.host.port}) =====")
        console.result(the_plan.scripts[name].rstrip("\n"))


def _record(the_plan: Plan, opts: LaunchOptions) -> jobs.Job:
    job = jobs.Job(
        id=the_plan.job_id,
        script=the_plan.payload.script_rel,
        args=list(opts.script_args),
        hosts=[
            jobs.JobHost.of(c.host, python=c.python, node_rank=rank, nproc=c.nproc)
            for rank, c in enumerate(the_plan.checks.checks)
        ],
        master=f"{the_plan.checks.master_addr}:{the_plan.checks.master_port}",
        detach=opts.detach,
        grace_s=opts.grace_s,
        state=jobs.STARTING,
        launcher=the_plan.launcher.name,
    )
    job.save()
    return job


def _push_all(the_plan: Plan, job: jobs.Job, opts: LaunchOptions) -> dict[str, push.Delivery]:
    """Every host's files, each host's receive.py left waiting to start the job; none started yet."""
    agent_code = onhost.path("agent.py").read_bytes()
    launcher_files = the_plan.launcher.host_files()  # what run.sh runs (run_torchrun.py)
    payload = the_plan.payload
    console.step(
        f"Pushing {len(payload.files)} file(s) ({payload.total_bytes / 1e6:.1f} MB) to ~/{job.remote_dir} "
        f"on {len(job.hosts)} host(s)"
    )

    def one(check: preflight.HostCheck) -> push.Delivery:
        assert check.client is not None
        name = check.host.name
        extra = {
            "agent.py": agent_code,
            **launcher_files,
            "run.sh": the_plan.scripts[name].encode(),
            "job_id": job.id.encode(),
            "grace": str(opts.grace_s).encode(),
        }
        # The master holds its port from here to the job's end: a launch racing this one is refused now.
        claim = the_plan.checks.master_port if check is the_plan.checks.checks[0] else None
        ahead = the_plan.ahead.get(name)
        return push.push(name, check.client, check.python, job.remote_dir, payload, extra, claim, ahead)

    outcomes = ssh.fan_out(the_plan.checks.checks, one)
    deliveries = {o.item.host.name: o.value for o in outcomes if o.value is not None}
    try:
        ssh.values(outcomes)
    except BaseException:
        for delivery in deliveries.values():
            delivery.cancel()  # nothing starts anywhere
        job.finish("failed", {})
        raise
    sent = sum(d.stats.sent for d in deliveries.values())
    unchanged = sum(d.stats.unchanged for d in deliveries.values())
    console.detail(f"sent {sent} file(s), {unchanged} unchanged and skipped")
    return deliveries


def _start_detached(the_plan: Plan, job: jobs.Job, deliveries: dict[str, push.Delivery]) -> None:
    def start(check: preflight.HostCheck) -> str | None:
        delivery = deliveries[check.host.name]
        try:
            channel = delivery.start("start")
            channel.settimeout(60)
            out = channel.read().decode(errors="replace")
            err = channel.read_stderr().decode(errors="replace")
            rc = channel.exit_status()
        except ssh.SessionLost as exc:
            return f"{check.host.name}: SSH failed while starting the job ({ssh.reason(exc.cause)})"
        finally:
            delivery.channel.close()
        return None if rc == 0 else f"{check.host.name}: {ssh.Result(rc, out, err).last_line}"

    errors = [e for e in ssh.values(ssh.fan_out(the_plan.checks.checks, start)) if e]
    if errors:
        stopping.stop_hosts(the_plan.checks.clients, job)
        job.finish("failed", {})
        raise GpuprovError(f"job {job.id} did not start: {'; '.join(errors)}; stopped it everywhere")
    job.mark(jobs.RUNNING)
    console.success(f"Job {job.id} is running on {len(job.hosts)} host(s), detached")
    console.result(job.id)
    console.info(f"  gpuprov logs {job.id} -f    gpuprov jobs    gpuprov stop {job.id}")


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM to gpuprov tears the job down like Ctrl-C."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _run_attached(
    the_plan: Plan, job: jobs.Job, started: float, deliveries: dict[str, push.Delivery]
) -> None:
    names = [h.name for h in job.hosts]
    watch = nccl_transport.Watch(the_plan.ib_hosts).line if the_plan.ib_hosts else None
    printer = stream.Printer(names, {n: job.log_path(n) for n in names}, stream.rank_layout(job), watch)
    attached = AttachedJob(job, names, the_plan.checks.clients, printer, fail_fast=True)
    with _sigterm_as_interrupt():
        try:
            job.mark(jobs.RUNNING)
            console.step(f"Starting job {job.id} on {len(names)} host(s) (logs: {job.local_dir})")
            for h in job.hosts:
                # No waiting for an answer: each agent reports its start (or its failure) on its stream.
                if not attached.start(h.name, deliveries.pop(h.name)):
                    break  # the job is being torn down on the hosts started so far
            attached.wait()
        except KeyboardInterrupt:
            # A second Ctrl-C must not cut the teardown short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with interrupts.shielded():
                console.warning("interrupted")
                attached.interrupt()
        finally:
            for delivery in deliveries.values():  # hosts not started (Ctrl-C while starting)
                delivery.cancel()
            attached.close()
    _report(attached, started)


def _report(attached: AttachedJob, started: float) -> None:
    """Record how the job ended; on failure, a table and GpuprovError (KeyboardInterrupt if interrupted)."""
    job, names, codes, lost = attached.job, attached.names, attached.codes, attached.lost
    exit_codes: dict[str, int | None] = {n: codes.get(n) for n in names}
    elapsed = time.monotonic() - started
    if not attached.interrupted and not lost and all(code == 0 for code in codes.values()):
        job.finish("succeeded", exit_codes)
        console.success(
            f"Job {job.id} finished on {len(names)} host(s) in {elapsed:.1f} s (logs: {job.local_dir})"
        )
        return
    job.finish("interrupted" if attached.interrupted else "failed", exit_codes)
    _failure_table(attached)
    if attached.interrupted:
        raise KeyboardInterrupt
    culprit = attached.first_failure or next((n for n in names if codes.get(n)), names[0])
    why = lost.get(culprit) or f"exited with {codes.get(culprit)}"
    raise GpuprovError(
        f"job {job.id} failed: {culprit} {why}; the other hosts were stopped (logs: {job.local_dir})"
    )


def _failure_table(attached: AttachedJob) -> None:
    job, codes, lost = attached.job, attached.codes, attached.lost
    rows = []
    for h in job.hosts:
        if h.name in lost:
            status = f"lost: {lost[h.name]}"
        elif h.name in attached.stopped_by_us:
            status = f"{codes.get(h.name)} (stopped by gpuprov)"
        else:
            status = str(codes.get(h.name))
        rows.append([h.name, status, "\n".join(stream.last_lines(job.log_path(h.name)))])
    console.table(f"Job {job.id}", ["host", "exit code", "last lines of its log"], rows)
