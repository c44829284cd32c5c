"""Stop a job's processes on some of its hosts at once, through each host's agent (`agent.py stop`)."""

from __future__ import annotations

import json

from gpuprov import console, hosts, ssh
from gpuprov.errors import GpuprovError
from gpuprov.launch import jobs, remote

# After the grace period: how long a stop (and a teardown) waits for hosts to report. A host's agent reports
# after its stop, which may include removing the job's container (onhost/agent.py REMOVE_TIMEOUT_S, 60 s:
# an engine on the vfs driver, which a site may choose, deletes a whole copy of the image; with overlay2 it
# takes under a second); hosts that report sooner end the wait sooner, so only a lost host waits it out.
STOP_EXTRA_S = 70.0


def stop_hosts(
    clients: dict[str, ssh.Client], job: jobs.Job, python: dict[str, str] | None = None
) -> dict[str, str]:
    """Stop the job on these hosts at once (SIGTERM, SIGKILL after the grace period); host -> problem."""
    py = python or {h.name: h.python for h in job.hosts}

    def stop(name: str) -> tuple[str, str | None]:
        cmd = remote.agent_command(py[name], job.remote_dir, "stop", job.remote_dir, str(job.grace_s))
        try:
            res = ssh.run(clients[name], cmd, timeout=job.grace_s + STOP_EXTRA_S)
        except GpuprovError:
            # The connection is gone: try a fresh one (the agent also stops the job when its channel dies).
            try:
                client = ssh.connect(job_host(job, name))
            except GpuprovError as exc:
                return name, exc.message
            try:
                res = ssh.run(client, cmd, timeout=job.grace_s + STOP_EXTRA_S)
            except GpuprovError as exc:
                return name, exc.message
            finally:
                client.close()
        if res.rc != 0:
            return name, res.last_line
        left = json.loads(res.stdout.strip().splitlines()[-1]).get("left", 0)
        return name, (f"{left} process(es) could not be killed" if left else None)

    results = ssh.values(ssh.fan_out(list(clients), stop))
    problems = {name: why for name, why in results if why}
    for name, why in problems.items():
        console.warning(f"{name}: stopping job {job.id} failed: {why}")
    return problems


def job_host(job: jobs.Job, name: str) -> hosts.Host:
    """The job's host `name`, as recorded when it was launched."""
    for h in job.hosts:
        if h.name == name:
            return h.to_host()
    raise KeyError(name)
