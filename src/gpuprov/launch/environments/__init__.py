"""What a job's ranks run in: the host's own Python env, or a container image (`--image`).

An environment answers preflight for each host in that host's one round trip: which interpreter runs the
job (and agent.py, receive.py beside it), torch, CUDA and NCCL versions and the GPUs, every problem as a
preflight.Problem, and leaves probe.py's channel open for the port test (preflight.Sections); then whether
the hosts agree. The launcher (how ranks start) and the scheduler (where) are the same for every one.

Adding one: a class with these members in a module of this package and an entry in ENVIRONMENTS (see
docs/developers/extending-launch.md). Its modules import preflight; preflight imports this package only
inside run() (no import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gpuprov.launch.environments.container_image import ContainerImage
from gpuprov.launch.environments.host_python import HostPython

if TYPE_CHECKING:
    from gpuprov.hosts import Host
    from gpuprov.launch.preflight import HostCheck, Problem


class Environment(Protocol):
    """The interpreter and libraries a job's ranks run with, and preflight's questions about them."""

    name: str
    default_python: str  # the interpreter where no host was asked (sbatch scripts, Slurm job records)

    def check_host(self, check: HostCheck) -> None:
        """On check.client, in one command: python, torch, CUDA, NCCL and GPUs into check, problems into
        check.problems (BadInput: an inventory value; GpuprovError: the session broke). Leaves check.answers
        open (probe.py check, for the port test) when the host can run the job."""
        ...

    def python_choice(self, host: Host) -> str:
        """Shell lines that set $py to the interpreter check_host will find for agent.py and receive.py
        (the push runs them beside the checks, before the answer is known; a wrong guess costs only that
        the push starts again after preflight)."""
        ...

    def finish_check(self, check: HostCheck) -> None:
        """End the host's check (wait for what still runs on check.answers) and close its channel."""
        ...

    def disagreements(self, checks: list[HostCheck]) -> list[Problem]:
        """What differs between the hosts that must not (versions)."""
        ...

    def describe(self, check: HostCheck) -> str:
        """One host's answers for the preflight summary line."""
        ...

    def rank_python(self, check: HostCheck) -> str:
        """The interpreter the launcher's script starts the ranks with on this host."""
        ...

    def host_script(self, script: str, job_id: str, job_dir: str, check: HostCheck) -> str:
        """run.sh from the launcher's script: as it is, or run inside the environment (a container)."""
        ...


ENVIRONMENTS: dict[str, Environment] = {"host-python": HostPython(), "container-image": ContainerImage()}
DEFAULT = "host-python"


def by_name(name: str) -> Environment:
    return ENVIRONMENTS[name]


def chosen(image: str | None) -> Environment:
    """The environment the options ask for: the image's (a fresh one: it keeps each host's answers)."""
    return ContainerImage(image) if image else by_name(DEFAULT)
