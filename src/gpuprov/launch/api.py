"""What other packages may use of launch (check and bench run their jobs through it); nothing else is public.

check and bench run a program on hosts as an ordinary launch job (preflight, push, live prefixed logs,
fail-fast teardown, a job record) and read its result from a host's log. tests/unit/test_architecture.py
keeps every other module of gpuprov.launch private to launch. The flow (and paramiko with it) is imported
only when a job runs, so that importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuprov import hosts
from gpuprov.launch import jobs, selection
from gpuprov.launch.options import Nproc, image_option, launcher_option
from gpuprov.launch.selection import HostChoice
from gpuprov.launch.slurm_nodes import SINFO_FORMAT as SLURM_SINFO_FORMAT
from gpuprov.launch.slurm_nodes import SlurmNode, listed_nodes
from gpuprov.launch.slurm_nodes import node_names as slurm_node_names

__all__ = [
    "AUTO", "SLURM_SINFO_FORMAT", "HostChoice", "Nproc", "SlurmNode", "active_jobs", "choose_hosts",
    "image_option", "job_log", "launcher_option", "listed_nodes", "run_job", "slurm_node_names", "stop_job",
]  # fmt: skip

AUTO = Nproc("auto")  # one process per GPU, or 1 on a host without GPUs


def choose_hosts(opts: HostChoice) -> tuple[hosts.Inventory, list[hosts.Host]]:
    """The inventory (narrowed by --limit) and the hosts --hosts or --nodes pick from it (the first: master).

    BadInput (an unknown host, --nodes past the inventory) before any SSH."""
    return selection.chosen(opts)


def run_job(
    script: Path,
    inventory: Path,
    host_names: Sequence[str],
    *,
    nproc: Nproc = AUTO,
    script_args: Sequence[str] = (),
    workdir: Path | None = None,
    launcher: str = "torchrun",
    image: str | None = None,
) -> str:
    """Run script on the named hosts (in that order) as one attached launch job; return its id. image:
    its ranks run inside this container image (`gpuprov launch --image`), preflight included.

    GpuprovError when the job failed (its hosts are stopped), KeyboardInterrupt on Ctrl-C, as `gpuprov
    launch` itself."""
    from gpuprov.launch import flow
    from gpuprov.launch.options import LaunchOptions

    opts = LaunchOptions(
        script=script,
        script_args=tuple(script_args),
        inventory=inventory,
        hosts=tuple(host_names),
        nproc=nproc,
        workdir=workdir,
        launcher=launcher,
        image=image,
    )
    return flow.launch(opts)


def job_log(job_id: str, host: str) -> Path:
    """The local copy of a job's output from one host (what its ranks printed, prefixed host/rank)."""
    return jobs.load(job_id).log_path(host)


def active_jobs(host_names: Sequence[str]) -> dict[str, list[str]]:
    """The jobs started from this machine over SSH (not through Slurm) whose record says they still run on
    some of host_names: job id -> those hosts. `gpuprov upgrade` waits for them before it changes a host."""
    wanted = set(host_names)
    found, _damaged = jobs.all_jobs()  # a damaged record is `gpuprov jobs`' to report
    active: dict[str, list[str]] = {}
    for job in found:
        if job.state not in jobs.ACTIVE_STATES or job.slurm_job_id is not None:
            continue
        on = [host.name for host in job.hosts if host.name in wanted]
        if on:
            active[job.id] = on
    return active


def stop_job(job_id: str) -> None:
    """`gpuprov stop JOB`: its ranks stopped on every host (or Slurm's scancel), recorded as stopped.
    GpuprovError when a host could not be reached (the job is then not recorded as stopped)."""
    from gpuprov.launch import control

    control.stop_job(job_id)
