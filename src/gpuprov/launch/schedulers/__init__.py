"""Where a job's ranks are started: over SSH by gpuprov itself, or by Slurm (`--scheduler NAME`).

A scheduler starts a job from checked options and, from its record alone, tells how it stands
(`gpuprov jobs`), prints its logs and stops it. The launcher (how ranks start: gpuprov.launch.launchers) and
the environment (what they run in: gpuprov.launch.environments) are the same for every scheduler. The
implementations import what connects to hosts (paramiko with it) only when they act: `gpuprov --help` and
the option checks do without.

Adding one: a class with these methods in a module of this package, an entry in SCHEDULERS (its name is a
`--scheduler` choice from then on), and an `owns` that tells its job records from the others'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gpuprov.launch.schedulers.over_ssh import OverSsh
from gpuprov.launch.schedulers.through_slurm import ThroughSlurm

if TYPE_CHECKING:
    from gpuprov.launch.jobs import Job
    from gpuprov.launch.options import LaunchOptions


class Scheduler(Protocol):
    """Starts a job's ranks on its hosts, and follows, stops and lists the jobs it started."""

    name: str

    def launch(self, opts: LaunchOptions, argv: list[str]) -> str:
        """Start the job (attached: to its end); its id. argv: the command line, for the records it writes."""
        ...

    def owns(self, job: Job) -> bool:
        """Whether this scheduler started the job of this record."""
        ...

    def refresh(self, job: Job) -> tuple[Job, str]:
        """The job as it stands now (its end recorded once known), and the state `gpuprov jobs` shows."""
        ...

    def show_logs(self, job: Job, follow: bool) -> None:
        """`gpuprov logs JOB [-f]`."""
        ...

    def stop(self, job: Job) -> None:
        """`gpuprov stop JOB`: recorded as stopped once no rank of it runs anywhere."""
        ...


SCHEDULERS: dict[str, Scheduler] = {"ssh": OverSsh(), "slurm": ThroughSlurm()}
NAMES = tuple(SCHEDULERS)  # --scheduler's choices
DEFAULT = "ssh"


def by_name(name: str) -> Scheduler:
    return SCHEDULERS[name]


def of_job(job: Job) -> Scheduler:
    """The scheduler that started the job of this record: one that claims it, else the default."""
    claimed = (s for name, s in SCHEDULERS.items() if name != DEFAULT and s.owns(job))
    return next(claimed, SCHEDULERS[DEFAULT])
