"""`gpuprov launch` from options to a finished (or detached) job; and jobs / logs / stop.

options -> inventory + hosts -> preflight (all hosts at once) -> per-host torchrun scripts
-> push (SFTP, unchanged files skipped) -> start every host's agent -> stream, fail fast, report
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import paramiko

from gpuprov import console, hosts, interrupts, ssh
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import jobs, options, preflight, push, remote, render, selection, stream
from gpuprov.launch.options import LaunchOptions

AGENT_SOURCE = Path(__file__).with_name("agent.py")
STOP_EXTRA_S = 10.0  # after the grace period: how long teardown waits for hosts to report


# ----- planning ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    job_id: str
    selected: list[hosts.Host]
    checks: preflight.Preflight
    commands: dict[str, render.HostCommand]
    scripts: dict[str, str]
    payload: push.Payload


def host_env(host: hosts.Host, user_env: dict[str, str], job_id: str, gpus: int) -> dict[str, str]:
    """The job's environment on one host: the host's NIC choice, the user's --env, gpuprov's own."""
    env: dict[str, str] = {}
    nccl_if = host.vars.get("nccl_socket_ifname") or host.vars.get("gpuprov_nccl_socket_ifname")
    gloo_if = host.vars.get("gloo_socket_ifname") or host.vars.get("gpuprov_gloo_socket_ifname") or nccl_if
    if nccl_if:
        env["NCCL_SOCKET_IFNAME"] = str(nccl_if)
    if gloo_if:
        env["GLOO_SOCKET_IFNAME"] = str(gloo_if)
    env.update(user_env)
    env["PYTHONUNBUFFERED"] = env.get("PYTHONUNBUFFERED", "1")
    env["GPUPROV_JOB_ID"] = job_id
    env["GPUPROV_GPUS"] = str(gpus)
    env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = render.LOG_LINE_PREFIX_TEMPLATE
    return env


def build_commands(
    job_id: str,
    opts: LaunchOptions,
    checks: list[preflight.HostCheck],
    master_addr: str,
    master_port: int,
    script_rel: str,
) -> dict[str, render.HostCommand]:
    job_dir = f"{remote.JOBS_DIR}/{job_id}"
    return {
        check.host.name: render.HostCommand(
            job_id=job_id,
            host=check.host.name,
            node_rank=rank,
            nnodes=len(checks),
            nproc=check.nproc,
            python=check.python,
            job_dir=job_dir,
            script=script_rel,
            script_args=opts.script_args,
            master_addr=master_addr,
            master_port=master_port,
            rdzv=opts.rdzv,
            max_restarts=opts.max_restarts,
            env=host_env(check.host, opts.env, job_id, check.gpus),
        )
        for rank, check in enumerate(checks)
    }


def _template_for(opts: LaunchOptions, host: hosts.Host) -> Path | None:
    if opts.template is not None:
        return opts.template
    given = host.vars.get("gpuprov_torchrun_template")
    if not given:
        return None
    path = Path(str(given)).expanduser()
    label = f"{host.name}: gpuprov_torchrun_template {given}"
    options.check_file(path, label, "give the path of a Jinja2 torchrun template in the inventory")
    render.load(path, label=label)
    return path


def plan(opts: LaunchOptions) -> Plan:
    inventory = hosts.load(selection.inventory_path(opts.inventory))
    selected = selection.select(inventory, opts.nodes, opts.hosts)
    master_addr = selection.master_address(selected[0], len(selected))
    templates = {host.name: _template_for(opts, host) for host in selected}
    hosts.check_ssh_files(selected, where="", fix="fix the path")
    payload = push.collect(opts.script, opts.workdir, opts.include_large, opts.max_file_mb)
    console.step(f"Preflight on {len(selected)} host(s): {', '.join(h.name for h in selected)}")
    try:
        checks = preflight.run(selected, master_addr, opts.master_port, opts.nproc)
    except preflight.PreflightFailed as exc:
        if len(exc.problems) > 1:
            _problem_table(exc.problems, [h.name for h in selected])
        raise
    job_id = jobs.new_id()
    try:
        commands = build_commands(
            job_id, opts, checks.checks, master_addr, checks.master_port, payload.script_rel
        )
        scripts = {name: render.torchrun_script(cmd, templates[name]) for name, cmd in commands.items()}
    except BaseException:
        checks.close()
        raise
    for check in checks.checks:
        console.detail(
            f"{check.host.name}: python {check.python}, torch {check.torch}, CUDA {check.cuda}, "
            f"NCCL {check.nccl}, {check.gpus} GPU(s) -> {check.nproc} process(es)"
        )
    return Plan(job_id, selected, checks, commands, scripts, payload)


def _problem_table(problems: list[str], names: list[str]) -> None:
    """Every problem preflight found, one row each (the error line after it only counts them)."""
    rows = []
    for problem in problems:
        host = next((n for n in names if problem.startswith((f"{n}: ", f"{n} "))), "-")
        rows.append([host, problem])
    console.table(
        f"Preflight: {len(problems)} problems found, nothing was started", ["host", "problem"], rows
    )


# ----- launch ----------------------------------------------------------------------------------------------


def launch(opts: LaunchOptions) -> str:
    """Run the job; return its id. GpuprovError (exit 1) when it failed; KeyboardInterrupt on Ctrl-C."""
    started = time.monotonic()
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
        _push_all(the_plan, job, opts)
        if opts.detach:
            _start_detached(the_plan, job)
            return job.id
        _run_attached(the_plan, job, started)
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
            jobs.JobHost(
                name=c.host.name,
                address=c.host.address,
                port=c.host.port,
                user=c.host.user,
                key_file=str(c.host.key_file) if c.host.key_file else None,
                known_hosts=str(c.host.known_hosts),
                python=c.python,
                node_rank=rank,
                nproc=c.nproc,
            )
            for rank, c in enumerate(the_plan.checks.checks)
        ],
        master=f"{the_plan.checks.master_addr}:{the_plan.checks.master_port}",
        detach=opts.detach,
        grace_s=opts.grace_s,
        state=jobs.STARTING,
    )
    job.save()
    return job


def _push_all(the_plan: Plan, job: jobs.Job, opts: LaunchOptions) -> None:
    agent_code = AGENT_SOURCE.read_bytes()
    payload = the_plan.payload
    console.step(
        f"Pushing {len(payload.files)} file(s) ({payload.total_bytes / 1e6:.1f} MB) to ~/{job.remote_dir} "
        f"on {len(job.hosts)} host(s)"
    )

    def one(check: preflight.HostCheck) -> push.PushStats:
        assert check.client is not None
        name = check.host.name
        extra = {
            "agent.py": agent_code,
            "run.sh": the_plan.scripts[name].encode(),
            "job_id": job.id.encode(),
            "grace": str(opts.grace_s).encode(),
        }
        return push.push(name, check.client, job.remote_dir, payload, extra)

    try:
        stats = ssh.values(ssh.fan_out(the_plan.checks.checks, one))
    except BaseException:
        job.finish("failed", {})
        raise
    sent = sum(s.sent for s in stats)
    unchanged = sum(s.unchanged for s in stats)
    console.detail(f"sent {sent} file(s), {unchanged} unchanged and skipped")


def _start_detached(the_plan: Plan, job: jobs.Job) -> None:
    def start(check: preflight.HostCheck) -> str | None:
        assert check.client is not None
        res = ssh.run(
            check.client, remote.agent_command(check.python, job.remote_dir, "start", job.remote_dir)
        )
        return None if res.rc == 0 else f"{check.host.name}: {res.last_line}"

    errors = [e for e in ssh.values(ssh.fan_out(the_plan.checks.checks, start)) if e]
    if errors:
        _stop_hosts(the_plan.checks.clients, job)
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


def _run_attached(the_plan: Plan, job: jobs.Job, started: float) -> None:
    clients = the_plan.checks.clients
    names = [h.name for h in job.hosts]
    python = {h.name: h.python for h in job.hosts}
    events: queue.Queue[stream.Event] = queue.Queue()
    printer = stream.Printer(names, {n: job.log_path(n) for n in names})
    codes: dict[str, int | None] = {}
    lost: dict[str, str] = {}
    stopped_by_us: set[str] = set()
    interrupted = False
    teardown_started: float | None = None
    first_failure: str | None = None
    streams: list[stream.HostStream] = []

    def teardown(reason: str) -> None:
        nonlocal teardown_started
        if teardown_started is not None:
            return
        teardown_started = time.monotonic()
        running = [n for n in names if n not in codes and n not in lost]
        if running:
            console.warning(f"{reason}: stopping the job on {', '.join(running)}")
            stopped_by_us.update(running)
            # Fast path: each host's agent stops the job when its channel's stdin closes; hosts whose
            # channel is gone get a separate `agent.py stop` (over a fresh connection if need be).
            by_host = {s.host: s for s in streams}
            rest = [n for n in running if n not in by_host or not by_host[n].request_stop()]
            if rest:
                _stop_hosts({n: clients[n] for n in rest if n in clients}, job, python)

    with _sigterm_as_interrupt():
        try:
            job.mark(jobs.RUNNING)
            console.step(f"Starting job {job.id} on {len(names)} host(s) (logs: {job.local_dir})")
            for name in names:
                command = remote.agent_command(python[name], job.remote_dir, "attach", job.remote_dir)
                try:
                    streams.append(stream.open_stream(name, clients[name], command, events))
                except (paramiko.SSHException, OSError) as exc:
                    lost[name] = f"could not start: {exc}"
                    first_failure = first_failure or name
                    teardown(f"{name} could not start the job")
                    break
            while len(codes) + len(lost) < len(names):
                if teardown_started is not None and (
                    time.monotonic() - teardown_started > job.grace_s + STOP_EXTRA_S
                ):
                    for name in names:
                        if name not in codes and name not in lost:
                            lost[name] = "did not report after teardown"
                    break
                try:
                    event = events.get(timeout=0.2)
                except queue.Empty:
                    continue
                if event.kind == "line":
                    printer.line(event.host, event.text)
                elif event.kind == "exit":
                    codes[event.host] = event.code
                    if event.code != 0 and first_failure is None and event.host not in stopped_by_us:
                        first_failure = event.host
                        teardown(f"{event.host} exited with {event.code}")
                elif event.kind == "lost":
                    lost[event.host] = event.text
                    if first_failure is None:
                        first_failure = event.host
                    teardown(f"{event.host}: {event.text}")
                    # Its agent stops the job when the channel dies; make sure over a fresh connection.
                    _stop_hosts({event.host: clients[event.host]}, job, python)
        except KeyboardInterrupt:
            interrupted = True
            # A second Ctrl-C must not cut the teardown short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with interrupts.shielded():
                console.warning("interrupted")
                teardown("interrupted")
                _drain(events, printer, codes, lost, names, job.grace_s + STOP_EXTRA_S)
        finally:
            for s in streams:
                s.close()
            # Lines still queued (after a lost host, or a timeout) go to the terminal and the logs too.
            while not events.empty():
                event = events.get_nowait()
                if event.kind == "line":
                    printer.line(event.host, event.text)
            printer.close()

    exit_codes: dict[str, int | None] = {n: codes.get(n) for n in names}
    elapsed = time.monotonic() - started
    if not interrupted and not lost and all(code == 0 for code in codes.values()):
        job.finish("succeeded", exit_codes)
        console.success(
            f"Job {job.id} finished on {len(names)} host(s) in {elapsed:.1f} s (logs: {job.local_dir})"
        )
        return
    state = "interrupted" if interrupted else "failed"
    job.finish(state, exit_codes)
    _failure_table(job, codes, lost, stopped_by_us)
    if interrupted:
        raise KeyboardInterrupt
    culprit = first_failure or next((n for n in names if codes.get(n)), names[0])
    why = lost.get(culprit) or f"exited with {codes.get(culprit)}"
    raise GpuprovError(
        f"job {job.id} failed: {culprit} {why}; the other hosts were stopped (logs: {job.local_dir})"
    )


def _drain(
    events: queue.Queue[stream.Event],
    printer: stream.Printer,
    codes: dict[str, int | None],
    lost: dict[str, str],
    names: list[str],
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    while len(codes) + len(lost) < len(names) and time.monotonic() < deadline:
        try:
            event = events.get(timeout=0.2)
        except queue.Empty:
            continue
        if event.kind == "line":
            printer.line(event.host, event.text)
        elif event.kind == "exit":
            codes[event.host] = event.code
        else:
            lost[event.host] = event.text


def _failure_table(
    job: jobs.Job, codes: dict[str, int | None], lost: dict[str, str], stopped_by_us: set[str]
) -> None:
    rows = []
    for h in job.hosts:
        if h.name in lost:
            status = f"lost: {lost[h.name]}"
        elif h.name in stopped_by_us:
            status = f"{codes.get(h.name)} (stopped by gpuprov)"
        else:
            status = str(codes.get(h.name))
        rows.append([h.name, status, "\n".join(stream.last_lines(job.log_path(h.name)))])
    console.table(f"Job {job.id}", ["host", "exit code", "last lines of its log"], rows)


def _stop_hosts(
    clients: dict[str, paramiko.SSHClient], job: jobs.Job, python: dict[str, str] | None = None
) -> dict[str, str]:
    """Stop the job on these hosts at once (SIGTERM, SIGKILL after the grace period); host -> problem."""
    py = python or {h.name: h.python for h in job.hosts}

    def stop(name: str) -> tuple[str, str | None]:
        cmd = remote.agent_command(py[name], job.remote_dir, "stop", job.remote_dir, str(job.grace_s))
        try:
            res = ssh.run(clients[name], cmd, timeout=job.grace_s + STOP_EXTRA_S)
        except GpuprovError:
            # The connection is gone: try a fresh one (the agent also stops the job when its channel dies).
            try:
                client = ssh.connect(job_host(job, name))
            except GpuprovError as exc:
                return name, exc.message
            try:
                res = ssh.run(client, cmd, timeout=job.grace_s + STOP_EXTRA_S)
            except GpuprovError as exc:
                return name, exc.message
            finally:
                client.close()
        if res.rc != 0:
            return name, res.last_line
        left = json.loads(res.stdout.strip().splitlines()[-1]).get("left", 0)
        return name, (f"{left} process(es) could not be killed" if left else None)

    results = ssh.values(ssh.fan_out(list(clients), stop))
    problems = {name: why for name, why in results if why}
    for name, why in problems.items():
        console.warning(f"{name}: stopping job {job.id} failed: {why}")
    return problems


def job_host(job: jobs.Job, name: str) -> hosts.Host:
    for h in job.hosts:
        if h.name == name:
            return h.to_host()
    raise KeyError(name)


# ----- jobs / logs / stop -------------------------------------------------------------------------------


def _connect_all(job: jobs.Job) -> tuple[dict[str, paramiko.SSHClient], dict[str, str]]:
    """SSH connections to the job's hosts, and why each other host could not be reached.

    Input to fix (a key file that is not there, an unreadable known_hosts) raises BadInput instead.
    """
    hosts.check_ssh_files(
        [h.to_host() for h in job.hosts],
        where="",
        fix="fix the path",
        key_setting=f"ansible_ssh_private_key_file when job {job.id} was launched",
    )

    def one(h: jobs.JobHost) -> tuple[str, paramiko.SSHClient | None, GpuprovError | None]:
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
        clients, problems = _connect_all(job)
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
    rows = []
    found, damaged = jobs.all_jobs()
    for job in found:
        job = refresh(job)
        codes = ", ".join(f"{h}={'-' if c is None else c}" for h, c in job.exit_codes.items()) or "-"
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(job.created))
        rows.append([job.id, ",".join(h.name for h in job.hosts), job.state, started, codes])
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
    job = jobs.load(job_id)
    names = [h.name for h in job.hosts]
    if not follow and job.state in jobs.FINAL_STATES and not job.detach:
        printer = stream.Printer(names, {})
        for name in names:
            for line in (
                job.log_path(name).read_text(errors="replace").splitlines()
                if job.log_path(name).is_file()
                else []
            ):
                printer.line(name, line)
        return
    clients, problems = _connect_all(job)
    events: queue.Queue[stream.Event] = queue.Queue()
    # The host's log is the full record; the local copy is rewritten from it.
    for name in clients:
        job.log_path(name).unlink(missing_ok=True)
    printer = stream.Printer(names, {n: job.log_path(n) for n in clients})
    py = {h.name: h.python for h in job.hosts}
    streams = []
    try:
        for name, client in clients.items():
            if follow:
                cmd = remote.agent_command(py[name], job.remote_dir, "follow", job.remote_dir, "0")
            else:
                cmd = remote.log_command(job.remote_dir)
            streams.append(stream.open_stream(name, client, cmd, events))
        done: set[str] = set()
        while len(done) < len(streams):
            try:
                event = events.get(timeout=0.2)
            except queue.Empty:
                continue
            if event.kind == "line":
                printer.line(event.host, event.text)
            else:
                done.add(event.host)
    finally:
        for s in streams:
            s.close()
        printer.close()
        for client in clients.values():
            client.close()
    if problems:
        others = f"; the lines above are from {', '.join(clients)}" if clients else ""
        raise GpuprovError(
            f"cannot read the log of job {job.id} on {len(problems)} host(s): {'; '.join(problems.values())}"
            f"{others}",
            ExitCode.HOSTS_UNREACHABLE,
        )
    if follow:
        refresh(job)


def stop_job(job_id: str) -> None:
    job = jobs.load(job_id)
    clients, problems = _connect_all(job)
    try:
        # Recorded before any signal, so a client that sees the ranks exit from here on records `stopped`.
        job.mark(jobs.STOPPING)
        problems.update(_stop_hosts(clients, job))
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
