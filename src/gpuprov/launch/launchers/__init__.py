"""How a job's ranks are started on each host: torchrun (the default) or mpirun (`--launcher mpirun`).

A launcher turns one host's part of the job (render.HostCommand: node rank, process count, master,
environment...) into the bash script the host's agent runs (run.sh in the job's directory), names the
files it needs beside it, the environment variables it sets itself, and writes the same job as an sbatch
script for Slurm. Preflight, push, the agent, logs, stop and teardown are the same for every launcher.

Adding one: a class with these members in a module of this package, its templates in templates/, and an
entry in LAUNCHERS (see docs/developers/extending-launch.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gpuprov.launch.launchers.mpirun import Mpirun
from gpuprov.launch.launchers.torchrun import Torchrun

if TYPE_CHECKING:  # render imports jinja2: only where a script is rendered
    from gpuprov import hosts
    from gpuprov.launch.preflight import HostCheck, Problem
    from gpuprov.launch.render import HostCommand, SbatchJob


class Launcher(Protocol):
    """Starts one host's ranks of a job; the same job as an sbatch script."""

    name: str
    template_variable: str  # the inventory variable that names a host's own template of its script
    reserved_env: tuple[str, ...]  # set by the launcher for every job: --env may not set them

    def host_files(self) -> dict[str, bytes]:
        """Files pushed into the job's directory beside agent.py and run.sh (run.sh may run them)."""
        ...

    def job_env(self) -> dict[str, str]:
        """Variables set last in every host's environment of the job."""
        ...

    def peers_env(self, envs: list[dict[str, str]], checks: list[HostCheck]) -> dict[str, str]:
        """Variables every host's environment gets that depend on all hosts' (envs: each host's job
        environment, in node-rank order, as checks)."""
        ...

    def host_script(self, command: HostCommand, template: Path | None) -> str:
        """The bash script that starts this host's ranks (run.sh; what --dry-run prints)."""
        ...

    def sbatch_script(self, job: SbatchJob) -> str:
        """The sbatch script that runs the job under Slurm (--emit-sbatch, --scheduler slurm)."""
        ...

    def check_command(self, host: hosts.Host, selected: list[hosts.Host]) -> str:
        """Shell lines run first in the host's one preflight command ('' for none); their output in
        sections named `launcher-...` (preflight.Sections keeps them in HostCheck.launcher_answers)."""
        ...

    def problems(self, checks: list[HostCheck]) -> list[Problem]:
        """What the launcher's sections say keeps the job from starting, on a host or across hosts."""
        ...


LAUNCHERS: dict[str, Launcher] = {"torchrun": Torchrun(), "mpirun": Mpirun()}
DEFAULT = "torchrun"


def by_name(name: str) -> Launcher:
    return LAUNCHERS[name]
