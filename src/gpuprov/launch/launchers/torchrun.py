"""torchrun (torch.distributed.run) on each host: templates/torchrun.sh.j2, and srun + torchrun for Slurm.

Each host's run.sh runs run_torchrun.py (gpuprov.onhost) with the environment's python; it starts torchrun
with --tee, whose per-line prefix (LOG_LINE_PREFIX_TEMPLATE) the client maps to host/rank. The sbatch
script (templates/sbatch.sh.j2) starts one torchrun per node with srun, c10d rendezvous on the first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuprov import onhost

if TYPE_CHECKING:  # render imports jinja2: only where a script is rendered
    from gpuprov import hosts
    from gpuprov.launch.preflight import HostCheck, Problem
    from gpuprov.launch.render import HostCommand, SbatchJob

HOST_TEMPLATE = "torchrun.sh.j2"
SBATCH_TEMPLATE = "sbatch.sh.j2"
# torchrun prefixes each worker's line with this (with --tee); the client maps it to host/rank.
LOG_LINE_PREFIX_TEMPLATE = "[rank${rank}]:"
# What the sbatch script sets on each node (templates/slurm-node-routes.sh.j2): gloo's interface, and
# torchrun's --local-addr and --rdzv-conf is_host, which torchrun reads from PET_LOCAL_ADDR and PET_RDZV_CONF.
ROUTE_ENV = ("GLOO_SOCKET_IFNAME", "PET_LOCAL_ADDR", "PET_RDZV_CONF")


class Torchrun:
    name = "torchrun"
    template_variable = "gpuprov_torchrun_template"
    reserved_env: tuple[str, ...] = ("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",)

    def host_files(self) -> dict[str, bytes]:
        return {"run_torchrun.py": onhost.path("run_torchrun.py").read_bytes()}  # what run.sh runs

    def job_env(self) -> dict[str, str]:
        return {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": LOG_LINE_PREFIX_TEMPLATE}

    def peers_env(self, envs: list[dict[str, str]], checks: list[HostCheck]) -> dict[str, str]:
        return {}  # each host's run.sh exports its own environment to its own ranks

    def host_script(self, command: HostCommand, template: Path | None) -> str:
        from gpuprov.launch import render

        return render.host_script(command, template, HOST_TEMPLATE)

    def sbatch_script(self, job: SbatchJob) -> str:
        """srun + torchrun, c10d rendezvous on the first node."""
        from gpuprov.launch import render

        block = ""
        if job.image:  # the ranks inside the image: pyxis, else each node's engine
            from gpuprov.launch.environments import container_slurm

            # and the route the script found for the node (templates/sbatch.sh.j2, route_wrap)
            names = list(dict.fromkeys([*job.env, *self.job_env(), *ROUTE_ENV]))
            block = container_slurm.block(job, render.workdir_expr(job), names)
        return render.sbatch_script(job, SBATCH_TEMPLATE, container_block=block)

    def check_command(self, host: hosts.Host, selected: list[hosts.Host]) -> str:
        return ""  # torchrun comes with torch, which the environment's check already asks for

    def problems(self, checks: list[HostCheck]) -> list[Problem]:
        return []
