"""`--scheduler ssh` (the default): gpuprov connects to every host and starts its ranks there itself.

preflight, push and start share one SSH connection per host (gpuprov.launch.flow); each host's agent
keeps the job's processes and logs; job control goes to the agents (gpuprov.launch.control).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuprov.launch.jobs import Job
    from gpuprov.launch.options import LaunchOptions


class OverSsh:
    name = "ssh"

    def launch(self, opts: LaunchOptions, argv: list[str]) -> str:
        from gpuprov.launch import flow

        return flow.launch(opts)

    def owns(self, job: Job) -> bool:
        return True  # the default: every record that another scheduler does not claim

    def refresh(self, job: Job) -> tuple[Job, str]:
        from gpuprov.launch import control

        return control.refresh(job), ""

    def show_logs(self, job: Job, follow: bool) -> None:
        from gpuprov.launch import control

        control.show_host_logs(job, follow)

    def stop(self, job: Job) -> None:
        from gpuprov.launch import control

        control.stop_on_hosts(job)
