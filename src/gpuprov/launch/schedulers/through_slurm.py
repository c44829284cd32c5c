"""`--scheduler slurm`: the job is submitted with sbatch to the Slurm of the inventory (gpuprov.launch.slurm).

Its record carries Slurm's job id and controller, which is how its job control finds its way back here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuprov.launch.jobs import Job
    from gpuprov.launch.options import LaunchOptions


class ThroughSlurm:
    name = "slurm"

    def launch(self, opts: LaunchOptions, argv: list[str]) -> str:
        from gpuprov.launch import slurm

        return slurm.launch(opts, argv)

    def owns(self, job: Job) -> bool:
        return bool(job.slurm_job_id)

    def refresh(self, job: Job) -> tuple[Job, str]:
        from gpuprov.launch import slurm

        return slurm.refresh(job)

    def show_logs(self, job: Job, follow: bool) -> None:
        from gpuprov.launch import slurm

        slurm.show_logs(job, follow)

    def stop(self, job: Job) -> None:
        from gpuprov.launch import slurm

        slurm.stop(job)
