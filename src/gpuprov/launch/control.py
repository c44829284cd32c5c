"""Job control from this machine, from the job's record (no inventory needed): jobs, logs, stop.

Each record goes to the scheduler that started the job (gpuprov.launch.schedulers); the jobs started over
SSH are controlled here, through each host's agent.
"""

from __future__ import annotations

import contextlib
import json
import time

from gpuprov import console, hosts, ssh
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import jobs, remote, schedulers, stopping, stream
from gpuprov.launch.attached import AttachedJob


def connect_all(job: jobs.Job) -> tuple[dict[str, ssh.Client], dict[str, str]]:
    """SSH connections to the job's hosts, and why each other host could not be reached.

    Input to fix (a key file that is not there, an unreadable known_hosts) raises BadInput instead.
    """
    hosts.check_ssh_files(
        [h.to_host() for h in job.hosts],
        where="",
        fix="fix the path",
        key_setting=f"ansible_ssh_private_key_file when job {job.id} was launched",
    )

    def one(h: jobs.JobHost) -> tuple[str, ssh.Client | None, GpuprovError | None]:
        try:
            return h.name, ssh.connect(h.to_host()), None
        except GpuprovError as exc:
            return h.name, None, exc

    clients, problems = {}, {}
    bad_input: BadInput | None = None
    for name, client, problem in ssh.values(ssh.fan_out(job.hosts, one)):
        if client is not None:
            clients[name] = client
        elif isinstance(problem, BadInput):
            bad_input = bad_input or problem
        else:
            problems[name] = problem.message if problem else "unreachable"
    if bad_input is not None:
        for client in clients.values():
            client.close()
        raise bad_input
    return clients, problems


def refresh(job: jobs.Job) -> jobs.Job:
    """For a job recorded as running: ask its hosts how it stands, and record the end when it has ended."""
    if job.state not in jobs.ACTIVE_STATES:
        return job
    try:
        clients, problems = connect_all(job)
    except BadInput as exc:  # `gpuprov jobs` lists every job: say why this one's state is not known
        console.warning(f"job {job.id}: {exc.message}")
        return job
    try:

        def status(h: jobs.JobHost) -> tuple[str, dict[str, object] | None]:
            if h.name not in clients:
                return h.name, None
            cmd = remote.agent_command(h.python, job.remote_dir, "status", job.remote_dir)
            try:
                res = ssh.run(clients[h.name], cmd, timeout=30)
                return h.name, json.loads(res.stdout.strip().splitlines()[-1]) if res.rc == 0 else None
            except (GpuprovError, ValueError, IndexError):
                return h.name, None

        states = dict(ssh.values(ssh.fan_out(job.hosts, status)))
    finally:
        for client in clients.values():
            client.close()
    if problems or any(s is None for s in states.values()):
        return job  # unknown: keep the record as it is
    codes = {name: s["exit_code"] for name, s in states.items() if s is not None}
    if all(s is not None and s["state"] in ("exited", "missing", "lost") for s in states.values()):
        ok = all(code == 0 for code in codes.values())
        job.finish(
            "succeeded" if ok else "failed",
            {k: (int(v) if isinstance(v, int) else None) for k, v in codes.items()},
        )
    else:
        job.exit_codes = {k: (int(v) if isinstance(v, int) else None) for k, v in codes.items()}
    return job


_JOBS_HEADER = ["JOB", "HOSTS", "STATE", "STARTED", "EXIT CODES"]


def list_jobs() -> None:
    """`gpuprov jobs`: one row per recorded job, its state asked of its hosts while it runs."""
    rows = []
    found, damaged = jobs.all_jobs()
    for job in found:
        job, state = schedulers.of_job(job).refresh(job)
        codes = ", ".join(f"{h}={'-' if c is None else c}" for h, c in job.exit_codes.items()) or "-"
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(job.created))
        rows.append([job.id, ",".join(h.name for h in job.hosts), state or job.state, started, codes])
    # A damaged record is listed (and explained) rather than hidden: its job may still run somewhere.
    for record in damaged:
        console.warning(record.message)
        rows.append([record.path.parent.name, "-", "damaged", "-", "-"])
    if not rows:
        console.info(f"No jobs recorded in {jobs.jobs_root()}.")
        return
    widths = [max(len(r[i]) for r in [*rows, _JOBS_HEADER]) for i in range(len(_JOBS_HEADER))]
    for row in [_JOBS_HEADER, *rows]:
        console.result("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def show_logs(job_id: str, follow: bool) -> None:
    """`gpuprov logs JOB [-f]`."""
    job = jobs.load(job_id)
    schedulers.of_job(job).show_logs(job, follow)


def show_host_logs(job: jobs.Job, follow: bool) -> None:
    """The logs of a job started over SSH (the local copies of an attached job that has ended)."""
    names = [h.name for h in job.hosts]
    if not follow and job.state in jobs.FINAL_STATES and not job.detach:
        printer = stream.Printer(names, {}, stream.rank_layout(job))
        for name in names:
            for line in (
                job.log_path(name).read_text(errors="replace").splitlines()
                if job.log_path(name).is_file()
                else []
            ):
                printer.line(name, line)
        return
    clients, problems = connect_all(job)
    # The host's log is the full record; the local copy is rewritten from it.
    for name in clients:
        job.log_path(name).unlink(missing_ok=True)
    printer = stream.Printer(names, {n: job.log_path(n) for n in clients}, stream.rank_layout(job))
    watched = AttachedJob(job, list(clients), clients, printer, fail_fast=False)
    try:
        for h in job.hosts:
            if h.name not in clients:
                continue
            if follow:
                cmd = remote.agent_command(h.python, job.remote_dir, "follow", job.remote_dir, "0")
            else:
                cmd = remote.log_command(job.remote_dir)
            watched.open(h.name, cmd)
        watched.wait()
    finally:
        watched.close()
        for client in clients.values():
            client.close()
    problems.update(watched.lost)
    if problems:
        read = [n for n in clients if n not in watched.lost]
        others = f"; the lines above are from {', '.join(read)}" if read else ""
        raise GpuprovError(
            f"cannot read the log of job {job.id} on {len(problems)} host(s): {'; '.join(problems.values())}"
            f"{others}",
            ExitCode.HOSTS_UNREACHABLE,
        )
    if follow:
        refresh(job)


def stop_job(job_id: str) -> None:
    """`gpuprov stop JOB`."""
    job = jobs.load(job_id)
    schedulers.of_job(job).stop(job)


def stop_on_hosts(job: jobs.Job) -> None:
    """Stop a job started over SSH on every host; recorded as stopped once no process of it is left."""
    clients, problems = connect_all(job)
    try:
        # Recorded before any signal, so a client that sees the ranks exit from here on records `stopped`.
        job.mark(jobs.STOPPING)
        problems.update(stopping.stop_hosts(clients, job))
        codes: dict[str, int | None] = {}
        for h in job.hosts:
            if h.name not in clients:
                continue
            res = ssh.run(
                clients[h.name], remote.agent_command(h.python, job.remote_dir, "status", job.remote_dir)
            )
            with contextlib.suppress(ValueError, IndexError):
                codes[h.name] = json.loads(res.stdout.strip().splitlines()[-1]).get("exit_code")
    finally:
        for client in clients.values():
            client.close()
    if problems:
        raise GpuprovError(
            f"job {job.id}: could not stop it on {', '.join(sorted(problems))} "
            f"({'; '.join(problems.values())}); run `gpuprov stop {job.id}` again when the host is back"
        )
    job.finish("stopped", codes)
    console.success(f"Job {job.id} stopped on {len(job.hosts)} host(s); no process of it is left")
