"""`gpuprov launch --emit-sbatch FILE`: the same job as an sbatch script (srun + torchrun) for Slurm."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gpuprov import console, host_options, hosts
from gpuprov.errors import BadInput
from gpuprov.launch import environments, launchers, render, selection
from gpuprov.launch.options import DEFAULT_MASTER_PORT, LaunchOptions, not_a_regular_file


def node_count(opts: LaunchOptions) -> int:
    """--nodes N, or the --hosts named (each a host of the inventory), or every host of the inventory.

    --nodes needs no inventory (Slurm picks N nodes); --hosts names are checked as SSH launching checks
    them, so a script is never written for hosts that do not exist, and without an inventory they are
    refused (nothing to check them against, and the script could not name them to Slurm anyway)."""
    if opts.nodes is not None:
        return opts.nodes
    if opts.hosts:
        try:
            inventory = host_options.inventory_path(opts.inventory)
        except BadInput:
            given = ",".join(opts.hosts)
            raise BadInput(
                f"--hosts {given}: no inventory to check the host names against (none given, no "
                f"${host_options.INVENTORY_ENV}, no inventory.ini in {Path.cwd()}); give -i INVENTORY, or "
                f"--nodes {len(opts.hosts)} for a job on any {len(opts.hosts)} nodes Slurm picks"
            ) from None
        return len(selection.select(hosts.load(inventory, opts.limit), None, opts.hosts, opts.limit))
    return len(hosts.load(host_options.inventory_path(opts.inventory), opts.limit).hosts)


def build(opts: LaunchOptions, argv: list[str]) -> str:
    workdir = opts.workdir or opts.script.parent
    script = (
        opts.script.relative_to(workdir).as_posix()
        if opts.script.is_relative_to(workdir)
        else str(opts.script)
    )
    target = opts.emit_sbatch or Path("job.sbatch")
    the_job = job(opts, argv, node_count(opts), str(workdir), script, target.name)
    return launchers.by_name(opts.launcher).sbatch_script(the_job)


def job(
    opts: LaunchOptions,
    argv: list[str],
    nnodes: int,
    workdir: str,
    script: str,
    file_name: str,
    workdir_relative: bool = False,
    gpus_per_node: int = 0,
    python: str = "",
) -> render.SbatchJob:
    """What the sbatch template is given for this launch (--emit-sbatch and --scheduler slurm alike)."""
    return render.SbatchJob(
        job_name=render.job_name(f"gpuprov-{opts.script.stem}"),
        nnodes=nnodes,
        nproc=str(opts.nproc),
        python=python or environments.chosen(opts.image).default_python,
        workdir=workdir,
        script=script,
        script_args=opts.script_args,
        master_port=opts.master_port or DEFAULT_MASTER_PORT,
        max_restarts=opts.max_restarts,
        env=opts.env,
        launch_args=" ".join(render.quote(a) for a in argv),
        file_name=file_name,
        workdir_relative=workdir_relative,
        image=opts.image or "",
        gpus_per_node=gpus_per_node,
    )


def write(opts: LaunchOptions, argv: list[str]) -> Path:
    """The script, written atomically: a temp file beside the target, renamed over it; none left behind."""
    assert opts.emit_sbatch is not None
    text = build(opts, argv)
    target = opts.emit_sbatch  # a new path or a regular file in an existing directory (options checked)
    # The script exports the job's --env values: then it is the user's alone.
    mode = 0o700 if opts.env else 0o755
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w") as f:
            os.fchmod(fd, mode)
            f.write(text)
        kind = not_a_regular_file(target)  # it may have changed since the options were checked
        if kind is not None:
            raise BadInput(f"--emit-sbatch {target} is {kind}, not a regular file; give a new file name")
        os.replace(tmp, target)
    except OSError as exc:
        raise BadInput(f"--emit-sbatch {target} cannot be written: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)
    console.success(f"Wrote {target}: submit it with `sbatch {target}` (nothing was started)")
    return target
