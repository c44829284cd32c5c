"""The part of an mpirun job on a host other than the first: `python mpirun_standby.py JOBDIR`.

Under --launcher mpirun only the first host's run.sh starts anything (mpirun); Open MPI's rsh launcher
then starts its daemon (orted) on every other host over SSH, and orted starts that host's ranks. The
other hosts' run.sh runs this instead, so that their agents have the job's part on them to report and to
stop: it waits until the job's processes on this host have come and gone, and exits 0.

The job's processes on this host are found as the agent finds them: processes of this user whose
environment carries GPUPROV_JOB_ID=<the job> (the ssh command of the job's rsh agent exports it before
orted, so orted and the ranks it starts carry it), other than this script's own process group. The rsh
agent also writes JOBDIR/orted.started first: a job whose ranks ended before this script looked is not
waited for, and a host where no daemon came within START_TIMEOUT_S reports that (mpirun on the first
host failed before it got here; an attached launch has already torn the job down by then).

Standard library only, no import from gpuprov; parses on Python 3.6 (it runs with the job's Python).
"""

import os
import sys
import time
from typing import List

POLL_S = 0.2
START_TIMEOUT_S = 120.0
MARKER = "orted.started"


def job_processes(job_id: str, own_group: int) -> List[int]:
    """Pids of this user's processes that carry GPUPROV_JOB_ID=job_id, outside own_group."""
    needle = ("GPUPROV_JOB_ID=" + job_id).encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            if os.getpgid(pid) == own_group:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = b"\0" + f.read()
        except OSError:  # gone, or another user's
            continue
        if b"\0" + needle in environ:
            found.append(pid)
    return found


def wait_for_job(jobdir: str, job_id: str, timeout: float = START_TIMEOUT_S) -> int:
    """0 once the job's daemon has started here and its processes are gone; 1 if none started in time."""
    own_group = os.getpgrp()
    marker = os.path.join(jobdir, MARKER)
    deadline = time.monotonic() + timeout
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            sys.stderr.write(
                f"gpuprov: no mpirun daemon of job {job_id} reached this host within {timeout:.0f} s; "
                "see the first host's log\n"
            )
            return 1
        time.sleep(POLL_S)
    print(
        "gpuprov: mpirun's daemon started here; this host's ranks report through the first host", flush=True
    )
    # The marker is written just before orted starts: a few seconds for it to appear, then until the
    # job's processes here are gone.
    quiet_until = time.monotonic() + 5.0
    while True:
        if job_processes(job_id, own_group):
            quiet_until = 0.0
        elif time.monotonic() >= quiet_until:
            return 0
        time.sleep(POLL_S)


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: mpirun_standby.py JOBDIR\n")
        return 2
    job_id = os.environ.get("GPUPROV_JOB_ID", "")
    if not job_id:
        sys.stderr.write("mpirun_standby.py: GPUPROV_JOB_ID is not set (run by gpuprov's agent)\n")
        return 2
    return wait_for_job(argv[1], job_id)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
