"""A Slurm job's end from accounting (`sacct`), once slurmctld no longer knows the job.

slurmctld forgets a finished job MinJobAge seconds after it ends (300 by default: slurm.conf(5)); from then
on `scontrol show job` answers "Invalid job id specified" and only slurmdbd's database still has the job's
state and exit code. The slurm role runs slurmdbd unless `slurm_accounting_enabled` is false; without it
`sacct` exits 1 with "Slurm accounting storage is disabled" (the string in Debian 12's sacct 22.05.8), and
the job's end cannot be known: it is reported as unknown, never as running or stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

# sacct's message when AccountingStorageType is none; before 20.02 it began "SLURM" (matched without case).
_DISABLED = "accounting storage is disabled"
_DAY_S = 86400


@dataclass(frozen=True)
class Ended:
    """What accounting recorded: Slurm's state word ("CANCELLED by 0" -> "CANCELLED") and ExitCode."""

    state: str
    exit_code: str


@dataclass(frozen=True)
class NotKnown:
    """Why accounting could not tell: said after "unknown, " in `gpuprov jobs`."""

    why: str


def command(slurm_id: str, submitted: float) -> str:
    """The sacct call for one job's allocation (its batch and srun steps left out).

    --starttime is given, a day before the submission (time zones): by default sacct looks at jobs since
    midnight today ("Default is 00:00:00 of the current day": `sacct --help` of Debian 12's 22.05.8), so a
    job of yesterday would not be found.
    """
    since = time.strftime("%Y-%m-%d", time.gmtime(max(0.0, submitted - _DAY_S)))
    return (
        f"sacct --noheader --allocations --parsable2 --starttime {since} --jobs {slurm_id} "
        "--format JobID,State,ExitCode"
    )


def parse(slurm_id: str, rc: int, stdout: str, stderr: str) -> Ended | NotKnown:
    """The end of job slurm_id from what `command` printed (--parsable2: JobID|State|ExitCode)."""
    if rc != 0:
        text = (stderr.strip() or stdout.strip() or f"sacct exited {rc}").splitlines()[-1]
        if _DISABLED in text.lower():
            return NotKnown("no accounting")
        return NotKnown(f"accounting did not answer: {text}")
    for line in stdout.splitlines():
        fields = line.strip().split("|")
        if len(fields) == 3 and fields[0] == slurm_id and fields[1]:
            return Ended(fields[1].split()[0], fields[2])
    return NotKnown("not in accounting")
