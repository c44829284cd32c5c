"""Slurm's accounting on the sandbox's Slurm (node1: slurmctld, slurmdbd and Debian 12's real MariaDB): the
role's files and registration, a re-run that repairs a drifted database password without logging it, and
`gpuprov jobs` reading a detached job's end from sacct after slurmctld has forgotten it (MinJobAge)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Sandbox
from tests.integration.slurm.conftest import run_slurm_play
from tests.integration.slurm.test_slurm_launch import gp
from tests.integration.slurm.test_slurm_role import changed_counts, on

pytestmark = pytest.mark.integration

MIN_JOB_AGE = 5  # slurmctld then forgets a finished job within about a minute (it purges once a minute)
PASSWORD_RE = re.compile(r"^StoragePass=(\S+)$", re.M)


def storage_password(sandbox: Sandbox) -> str:
    found = PASSWORD_RE.search(on(sandbox, "node1", "cat", "/etc/slurm/slurmdbd.conf").stdout)
    assert found, "slurmdbd.conf has no StoragePass"
    return found.group(1)


@pytest.fixture(scope="module")
def short_min_job_age(slurm_cluster: Sandbox) -> Iterator[tuple[int, str]]:
    """The role re-run with MinJobAge=5 after drift (slurmdbd.conf readable by all, the database user's
    password changed behind the role's back); its exit code and output. The defaults come back after."""
    on(slurm_cluster, "node1", "chmod", "0644", "/etc/slurm/slurmdbd.conf")
    drift = on(
        slurm_cluster, "node1", "mariadb", "-e", "ALTER USER 'slurm'@'localhost' IDENTIFIED BY 'drifted'"
    )
    assert drift.returncode == 0, drift.stderr
    code, output = run_slurm_play(
        slurm_cluster, slurm_cluster.inventory, "-v", "-e", f"slurm_min_job_age={MIN_JOB_AGE}"
    )
    yield code, output
    code, restored = run_slurm_play(slurm_cluster, slurm_cluster.inventory)
    assert code == 0, restored


def test_accounting_runs_on_the_controller(slurm_cluster: Sandbox) -> None:
    for unit in ("mariadb", "slurmdbd"):
        assert on(slurm_cluster, "node1", "systemctl", "is-active", unit).stdout.strip() == "active", unit
    conf = on(slurm_cluster, "node1", "stat", "-c", "%a %U %G", "/etc/slurm/slurmdbd.conf")
    assert conf.stdout.strip() == "600 slurm slurm"
    slurm_conf = on(slurm_cluster, "node2", "cat", "/etc/slurm/slurm.conf").stdout
    assert "AccountingStorageType=accounting_storage/slurmdbd" in slurm_conf
    clusters = on(
        slurm_cluster, "node2", "sacctmgr", "--noheader", "--parsable2", "list", "cluster", "format=Cluster"
    )
    assert clusters.stdout.split() == ["gpuprov"], clusters.stderr
    # Only slurmdbd, on the same host, uses the database: MariaDB listens on the loopback address alone.
    listening = on(
        slurm_cluster, "node1", "mariadb", "-N", "-e", "SELECT @@bind_address, @@innodb_lock_wait_timeout"
    )
    assert listening.stdout.split() == ["127.0.0.1", "900"], listening


def test_a_rerun_repairs_the_database_user_and_logs_no_password(
    slurm_cluster: Sandbox, short_min_job_age: tuple[int, str]
) -> None:
    code, output = short_min_job_age
    assert code == 0, output
    assert storage_password(slurm_cluster) not in output
    assert "Give slurmdbd its database and database user" in output
    assert changed_counts(output)["node2"] >= 1  # slurm.conf's MinJobAge
    conf = on(slurm_cluster, "node1", "stat", "-c", "%a %U %G", "/etc/slurm/slurmdbd.conf")
    assert conf.stdout.strip() == "600 slurm slurm"
    # verify ran a job and found it COMPLETED in sacct, through slurmdbd and the repaired login
    assert "Check that accounting has the job as completed" in output


def test_jobs_shows_a_detached_jobs_end_after_slurmctld_forgot_it(
    slurm_cluster: Sandbox, short_min_job_age: tuple[int, str], tmp_path: Path
) -> None:
    assert short_min_job_age[0] == 0, short_min_job_age[1]
    script = tmp_path / "exit_with.py"
    script.write_text("import os, sys\nsys.exit(int(os.environ['EXIT_WITH']))\n")
    launched = {}
    for code in (0, 3):
        done = gp(slurm_cluster, "launch", "--scheduler", "slurm", "--nodes", "1", "--detach",
                  "--env", f"EXIT_WITH={code}", str(script))  # fmt: skip
        assert done.returncode == 0, done.stderr
        slurm_id = re.search(r"submitted to Slurm as job (\d+)", done.stderr)
        assert slurm_id, done.stderr
        launched[code] = (done.stdout.strip().splitlines()[-1], slurm_id.group(1))
    deadline, known = time.monotonic() + 150, ["?"]
    while known and time.monotonic() < deadline:
        time.sleep(5)
        known = [
            i
            for _, i in launched.values()
            if on(slurm_cluster, "node1", "scontrol", "show", "job", i).returncode == 0
        ]
    assert not known, f"slurmctld still knows Slurm jobs {known} (MinJobAge={MIN_JOB_AGE})"
    listed = gp(slurm_cluster, "jobs").stdout
    rows = {
        code: next(line for line in listed.splitlines() if line.startswith(job))
        for code, (job, _) in launched.items()
    }
    assert "succeeded (slurm" in rows[0] and "=0" in rows[0], listed
    assert "failed (slurm" in rows[3] and "=0" not in rows[3], listed  # torchrun's code for a failed rank
