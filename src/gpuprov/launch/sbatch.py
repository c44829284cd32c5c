"""`gpuprov launch --emit-sbatch FILE`: the same job as an sbatch script (srun + torchrun) for Slurm."""

from __future__ import annotations

import os
from pathlib import Path

from gpuprov import console, hosts
from gpuprov.errors import BadInput
from gpuprov.launch import environments, launchers, render, selection
from gpuprov.launch.options import DEFAULT_MASTER_PORT, LaunchOptions


def node_count(opts: LaunchOptions) -> int:
    """--nodes or --hosts give the count; otherwise every host of the inventory."""
    if opts.nodes is not None:
        return opts.nodes
    if opts.hosts:
        return len(opts.hosts)
    return len(hosts.load(selection.inventory_path(opts.inventory), opts.limit).hosts)


def build(opts: LaunchOptions, argv: list[str]) -> str:
    workdir = opts.workdir or opts.script.parent
    script = (
        opts.script.relative_to(workdir).as_posix()
        if opts.script.is_relative_to(workdir)
        else str(opts.script)
    )
    target = opts.emit_sbatch or Path("job.sbatch")
    the_job = job(opts, argv, node_count(opts), str(workdir), script, target.name)
    return launchers.by_name(launchers.DEFAULT).sbatch_script(the_job)


def job(
    opts: LaunchOptions,
    argv: list[str],
    nnodes: int,
    workdir: str,
    script: str,
    file_name: str,
    workdir_relative: bool = False,
) -> render.SbatchJob:
    """What the sbatch template is given for this launch (--emit-sbatch and --scheduler slurm alike)."""
    return render.SbatchJob(
        job_name=render.job_name(f"gpuprov-{opts.script.stem}"),
        nnodes=nnodes,
        nproc=str(opts.nproc),
        python=environments.by_name(environments.DEFAULT).default_python,
        workdir=workdir,
        script=script,
        script_args=opts.script_args,
        master_port=opts.master_port or DEFAULT_MASTER_PORT,
        max_restarts=opts.max_restarts,
        env=opts.env,
        launch_args=" ".join(render.quote(a) for a in argv),
        file_name=file_name,
        workdir_relative=workdir_relative,
    )


def write(opts: LaunchOptions, argv: list[str]) -> Path:
    assert opts.emit_sbatch is not None
    text = build(opts, argv)
    target = opts.emit_sbatch  # its directory exists (options.build checked)
    # The script exports the job's --env values: then it is the user's alone.
    mode = 0o700 if opts.env else 0o755
    try:
        tmp = target.with_name(f".{target.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(fd, mode)
            f.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        raise BadInput(f"--emit-sbatch {target} cannot be written: {exc.strerror or exc}") from None
    console.success(f"Wrote {target}: submit it with `sbatch {target}` (nothing was started)")
    return target
