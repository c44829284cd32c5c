"""Where a job lives on its hosts and the command lines that drive it there (SSH itself is gpuprov.ssh).

Every path is relative to the remote user's home and quoted for the remote shell; only $HOME is expanded.
"""

from __future__ import annotations

import shlex

from gpuprov.onhost.agent import EVENT_PREFIX

JOBS_DIR = ".gpuprov/jobs"  # on each host, relative to the user's home


def home_path(rel: str) -> str:
    """A path under the remote user's home, for a shell command: only $HOME is expanded."""
    return '"$HOME"/' + shlex.quote(rel)


def agent_command(python: str, job_dir: str, *args: str) -> str:
    """Run the job's agent.py (pushed into the job directory) with the env's Python."""
    parts = [shlex.quote(python), home_path(f"{job_dir}/agent.py")]
    parts += [shlex.quote(arg) for arg in args]
    return " ".join(parts)


def log_command(job_dir: str) -> str:
    """Print the job's log on the host, then the end event the log streams wait for."""
    return f"cat {home_path(f'{job_dir}/job.log')}; echo {shlex.quote(EVENT_PREFIX + 'exit 0')} >&2"
