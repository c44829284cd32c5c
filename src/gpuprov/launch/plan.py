"""What a launch will do, decided before anything is pushed or started.

options -> inventory + hosts -> preflight (all hosts at once, the environment's answers) -> each host's
command and its launcher's script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpuprov import console, hosts
from gpuprov.launch import (
    connect_ahead,
    environments,
    interfaces,
    jobs,
    launchers,
    options,
    preflight,
    push,
    remote,
    render,
    selection,
)
from gpuprov.launch.environments import Environment
from gpuprov.launch.environments.container_image import ContainerImage
from gpuprov.launch.launchers import Launcher
from gpuprov.launch.options import LaunchOptions


@dataclass(frozen=True)
class Plan:
    job_id: str
    selected: list[hosts.Host]
    checks: preflight.Preflight
    commands: dict[str, render.HostCommand]
    scripts: dict[str, str]
    payload: push.Payload
    launcher: Launcher
    ib_hosts: dict[str, list[str]] = field(default_factory=dict)  # --image: hosts with IB -> their devices
    ahead: dict[str, push.Ahead] = field(default_factory=dict)  # each host's push, started beside preflight


def host_env(
    host: hosts.Host,
    user_env: dict[str, str],
    job_id: str,
    gpus: int,
    launcher: Launcher,
    route: interfaces.Route | None = None,
) -> dict[str, str]:
    """The job's environment on one host: its NIC choice (the user's, else the interface toward its peers
    that preflight found: route), the user's --env, gpuprov's, the launcher's."""
    env = interfaces.socket_env(host, route)
    env.update(user_env)
    env["PYTHONUNBUFFERED"] = env.get("PYTHONUNBUFFERED", "1")
    env["GPUPROV_JOB_ID"] = job_id
    env["GPUPROV_GPUS"] = str(gpus)
    env.update(launcher.job_env())
    return env


def build_commands(
    job_id: str,
    opts: LaunchOptions,
    checks: list[preflight.HostCheck],
    master_addr: str,
    master_port: int,
    script_rel: str,
    launcher: Launcher | None = None,
    environment: Environment | None = None,
) -> dict[str, render.HostCommand]:
    """Each host's part of the job, for its launcher's script (default: the default launcher's), its ranks
    started with the environment's python (default: the host's own env)."""
    launcher = launcher or launchers.by_name(launchers.DEFAULT)
    environment = environment or environments.by_name(environments.DEFAULT)
    job_dir = f"{remote.JOBS_DIR}/{job_id}"
    peers = tuple((c.host.address, c.nproc) for c in checks)
    envs = [host_env(c.host, opts.env, job_id, c.gpus, launcher, c.route) for c in checks]
    shared = launcher.peers_env(envs, checks)
    return {
        check.host.name: render.HostCommand(
            job_id=job_id,
            host=check.host.name,
            node_rank=rank,
            nnodes=len(checks),
            nproc=check.nproc,
            python=environment.rank_python(check),
            job_dir=job_dir,
            script=script_rel,
            script_args=opts.script_args,
            master_addr=master_addr,
            master_port=master_port,
            rdzv=opts.rdzv,
            max_restarts=opts.max_restarts,
            env={**env, **shared},
            peers=peers,
            local_addr=interfaces.local_addr(check.route),
        )
        for rank, (check, env) in enumerate(zip(checks, envs, strict=True))
    }


def template_for(opts: LaunchOptions, host: hosts.Host, launcher: Launcher | None = None) -> Path | None:
    """The host's script template: --template, else the launcher's inventory variable (checked), else None."""
    if opts.template is not None:
        return opts.template
    variable = (launcher or launchers.by_name(launchers.DEFAULT)).template_variable
    given = host.vars.get(variable)
    if not given:
        return None
    path = Path(str(given)).expanduser()
    label = f"{host.name}: {variable} {given}"
    options.check_file(path, label, "give the path of a Jinja2 torchrun template in the inventory")
    render.load(path, label=label)
    return path


def plan(opts: LaunchOptions) -> Plan:
    """Check the input and every host (preflight); the plan holds the hosts' open SSH connections."""
    _, selected = connect_ahead.chosen(opts)  # the inventory read once, its hosts connecting meanwhile
    master_addr = selection.master_address(selected[0], len(selected))
    launcher = launchers.by_name(opts.launcher)
    environment = environments.chosen(opts.image)
    if isinstance(environment, ContainerImage):
        from gpuprov.launch import image_lock  # with the lock's modules: only an --image launch reads them

        image_lock.check(environment.image, selected)
    templates = {host.name: template_for(opts, host, launcher) for host in selected}
    hosts.check_ssh_files(selected, where="", fix="fix the path")
    payload = push.collect(opts.script, opts.workdir, opts.include_large, opts.max_file_mb)
    if opts.push_image and isinstance(environment, ContainerImage):
        from gpuprov.launch import image_delivery

        environment.pushed_id = image_delivery.push_missing(selected, environment.image).image_id
    console.step(f"Preflight on {len(selected)} host(s): {', '.join(h.name for h in selected)}")
    ahead: dict[str, push.Ahead] = {}

    def push_ahead(check: preflight.HostCheck) -> None:
        assert check.client is not None
        choose = environment.python_choice(check.host)
        ahead[check.host.name] = push.Ahead(check.host.name, check.client, choose, payload)

    try:
        checks = preflight.run(
            selected, master_addr, opts.master_port, opts.nproc, environment, launcher, opts.env,
            connected=None if opts.dry_run else push_ahead,
        )  # fmt: skip
    except preflight.PreflightFailed as exc:
        _cancel(ahead)
        if len(exc.problems) > 1:
            _problem_table(exc.problems, [h.name for h in selected])
        raise
    except BaseException:
        _cancel(ahead)
        raise
    template_problems = interfaces.template_problems(checks.checks, templates)
    if template_problems:
        _cancel(ahead)
        checks.close()
        raise preflight.PreflightFailed(template_problems)
    for one in ahead.values():
        one.release()  # preflight passed: a large push goes on now
    job_id = jobs.new_id()
    try:
        commands = build_commands(
            job_id, opts, checks.checks, master_addr, checks.master_port, payload.script_rel, launcher,
            environment,
        )  # fmt: skip
        by_name = {check.host.name: check for check in checks.checks}
        scripts = {
            name: environment.host_script(
                launcher.host_script(cmd, templates[name]), job_id, cmd.job_dir, by_name[name]
            )
            for name, cmd in commands.items()
        }
    except BaseException:
        _cancel(ahead)
        checks.close()
        raise
    for check in checks.checks:
        console.detail(
            f"{check.host.name}: {environment.describe(check)}, "
            f"{check.gpus} GPU(s) -> {check.nproc} process(es)"
        )
    ib_hosts = environment.ib_hosts() if isinstance(environment, ContainerImage) else {}
    return Plan(job_id, selected, checks, commands, scripts, payload, launcher, ib_hosts, ahead)


def _cancel(ahead: dict[str, push.Ahead]) -> None:
    """The pushes started beside a preflight that failed: each host's receive.py ends, no job dir made."""
    for one in ahead.values():
        one.cancel()


def _problem_table(problems: list[str], names: list[str]) -> None:
    """Every problem preflight found, one row each (the error line after it only counts them)."""
    rows = []
    for problem in problems:
        host = next((n for n in names if problem.startswith((f"{n}: ", f"{n} "))), "-")
        rows.append([host, problem])
    console.table(
        f"Preflight: {len(problems)} problems found, nothing was started", ["host", "problem"], rows
    )
