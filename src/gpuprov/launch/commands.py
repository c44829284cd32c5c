"""The click commands `launch`, `jobs`, `logs` and `stop` (registered in gpuprov.cli).

The modules that connect to hosts (flow, control, and paramiko with them) and sbatch are imported by the
command that runs them: `gpuprov --help` and the options' own errors do without them.
"""

from __future__ import annotations

import click

from gpuprov.launch import host_options, options
from gpuprov.launch import jobs as job_records

_GIVEN_ARGS = "gpuprov.launch.given_args"


class _LaunchCommand(click.Command):
    """`launch`, keeping the arguments it was given (for the command line an sbatch script records).

    They come from click, not sys.argv: `gpuprov -v launch ...` and `gpuprov.cli.main([...])` give the
    same record as `gpuprov launch ...`.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_GIVEN_ARGS] = list(args)
        return super().parse_args(ctx, args)


# Options end at SCRIPT: what follows it is the script's, `--epochs 3` as well as `-- --epochs 3`.
@click.command(
    "launch",
    cls=_LaunchCommand,
    context_settings={"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]},
)
@click.option(
    "-i", "--inventory", default=None, help="Inventory [default: $GPUPROV_INVENTORY, else ./inventory.ini]."
)
@host_options.host_selection
@click.option(
    "--nproc-per-node",
    "nproc",
    default="auto",
    show_default=True,
    help="Processes per host: a number, 'gpu' (one per GPU) or 'auto' (one per GPU, 1 without GPUs: gloo).",
)
@click.option(
    "--env", "env", multiple=True, metavar="K=V", help="Environment variable for the job (repeatable)."
)
@click.option("--env-file", default=None, help="File of K=V lines for the job's environment.")
@click.option(
    "--workdir", default=None, help="Directory to push with the script (without .git and large files)."
)
@click.option("--include-large", is_flag=True, help="Push workdir files over --max-file-mb too.")
@click.option(
    "--max-file-mb",
    type=int,
    default=options.DEFAULT_MAX_FILE_MB,
    show_default=True,
    help="Workdir files larger than this are not pushed (unless --include-large).",
)
@click.option(
    "--master-port",
    type=int,
    default=None,
    help="Rendezvous port on the master [default: first free from 29500].",
)
@click.option(
    "--rdzv",
    type=click.Choice(options.RDZV_CHOICES),
    default="static",
    show_default=True,
    help="static: fixed node ranks, master addr/port; c10d: c10d rendezvous on the master.",
)
@click.option("--max-restarts", type=int, default=0, show_default=True, help="torchrun --max-restarts.")
@click.option(
    "--grace",
    "grace_s",
    default=str(options.DEFAULT_GRACE_S),
    show_default=True,
    help="Seconds between SIGTERM and SIGKILL when the job is torn down "
    f"(at most {job_records.MAX_GRACE_S:.0f}).",
)
@click.option(
    "--template",
    default=None,
    help="Jinja2 template for the per-host torchrun script "
    "[default: templates/torchrun.sh.j2; or the inventory var gpuprov_torchrun_template].",
)
@click.option(
    "--detach", is_flag=True, help="Start the job and return; follow it with `gpuprov logs JOB -f`."
)
@click.option(
    "--dry-run", is_flag=True, help="Run preflight and print each host's exact command; start nothing."
)
@click.option(
    "--emit-sbatch",
    default=None,
    metavar="FILE",
    help="Write an sbatch script for the same job; start nothing.",
)
@click.option(
    "--scheduler",
    type=click.Choice(options.SCHEDULERS),
    default="ssh",
    show_default=True,
    help="ssh: gpuprov starts torchrun on each host; slurm: submit with sbatch on the inventory's "
    "[slurm_controller] (srun + torchrun).",
)
@click.argument("script")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def launch(
    inventory: str | None,
    nodes: int | None,
    host_list: str | None,
    nproc: str,
    env: tuple[str, ...],
    env_file: str | None,
    workdir: str | None,
    include_large: bool,
    max_file_mb: int,
    master_port: int | None,
    rdzv: str,
    max_restarts: int,
    grace_s: str,
    template: str | None,
    detach: bool,
    dry_run: bool,
    emit_sbatch: str | None,
    scheduler: str,
    script: str,
    script_args: tuple[str, ...],
) -> None:
    """Run SCRIPT on hosts of the inventory as one torchrun job: gpuprov launch [OPTIONS] SCRIPT [-- ARGS...]

    Preflight checks every host first (SSH, the Python env, versions, GPUs, master port and address);
    the script (and --workdir) is pushed to ~/.gpuprov/jobs/JOB on each host; every host's output
    streams here prefixed host/rank. When a host fails, the job is stopped on all of them.
    """
    if script_args[:1] == ("--",):  # `SCRIPT -- ARGS`: the separator is gpuprov's, not the script's
        script_args = script_args[1:]
    opts = options.build(
        script=script,
        script_args=script_args,
        inventory=inventory,
        nodes=nodes,
        hosts=host_list,
        nproc=nproc,
        env=env,
        env_file=env_file,
        workdir=workdir,
        include_large=include_large,
        max_file_mb=max_file_mb,
        master_port=master_port,
        rdzv=rdzv,
        max_restarts=max_restarts,
        detach=detach,
        dry_run=dry_run,
        emit_sbatch=emit_sbatch,
        template=template,
        grace_s=grace_s,
        scheduler=scheduler,
    )
    given: list[str] = click.get_current_context().meta[_GIVEN_ARGS]
    if opts.emit_sbatch is not None:
        from gpuprov.launch import sbatch

        sbatch.write(opts, given)
        return
    if opts.scheduler == "slurm":
        from gpuprov.launch import slurm

        slurm.launch(opts, given)
        return
    from gpuprov.launch import flow

    flow.launch(opts)


@click.command("jobs")
def jobs() -> None:
    """List the jobs launched from this machine: id, hosts, state, start, exit codes."""
    from gpuprov.launch import control

    control.list_jobs()


@click.command("logs")
@click.argument("job_id", metavar="JOB")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends.")
def logs(job_id: str, follow: bool) -> None:
    """Print a job's output from every host (prefixed host/rank)."""
    from gpuprov.launch import control

    control.show_logs(job_id, follow)


@click.command("stop")
@click.argument("job_id", metavar="JOB")
def stop(job_id: str) -> None:
    """Stop a job on every host (SIGTERM, then SIGKILL after its grace period)."""
    from gpuprov.launch import control

    control.stop_job(job_id)


COMMANDS = (launch, jobs, logs, stop)
