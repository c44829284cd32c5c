"""The click commands `launch`, `jobs`, `logs` and `stop` (registered in gpuprov.cli).

The modules that connect to hosts (flow, control, and paramiko with them) and sbatch are imported by the
command that runs them: `gpuprov --help` and the options' own errors do without them.
"""

from __future__ import annotations

import click

from gpuprov.launch import options

_GIVEN_ARGS = "gpuprov.launch.given_args"


class _LaunchCommand(click.Command):
    """`launch`, keeping the arguments it was given (for the command line an sbatch script records).

    They come from click, not sys.argv: `gpuprov -v launch ...` and `gpuprov.cli.main([...])` give the
    same record as `gpuprov launch ...`.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_GIVEN_ARGS] = list(args)
        return super().parse_args(ctx, args)


# Options end at SCRIPT: what follows it is the script's, `--epochs 3` as well as `-- --epochs 3`. Every
# option is a field of options.LaunchOptions (its click option, check and value written once there).
@click.command(
    "launch",
    cls=_LaunchCommand,
    context_settings={"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]},
)
@options.LAUNCH
def launch(opts: options.LaunchOptions) -> None:
    """Run SCRIPT on hosts of the inventory as one torchrun job: gpuprov launch [OPTIONS] SCRIPT [-- ARGS...]

    Preflight checks every host first (SSH, the Python env, versions, GPUs, master port and address);
    the script (and --workdir) is pushed to ~/.gpuprov/jobs/JOB on each host; every host's output
    streams here prefixed host/rank. When a host fails, the job is stopped on all of them. The inventory
    is given with -i (launch's arguments are SCRIPT and the script's own); --limit narrows it, then
    --nodes or --hosts pick from what is left.
    """
    given: list[str] = click.get_current_context().meta[_GIVEN_ARGS]
    if opts.emit_sbatch is not None:
        from gpuprov.launch import sbatch

        sbatch.write(opts, given)
        return
    from gpuprov.launch import schedulers

    if opts.scheduler != "ssh" or opts.push_image:  # Slurm's hosts, or an image pushed first
        schedulers.by_name(opts.scheduler).launch(opts, given)
        return
    from gpuprov.launch import connect_ahead

    with connect_ahead.opened(opts):  # the hosts' SSH connects run while the launch's modules load
        schedulers.by_name(opts.scheduler).launch(opts, given)


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
