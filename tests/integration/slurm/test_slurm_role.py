"""The slurm role on real Debian 12 Slurm (two sandbox nodes), and its refusal of a mixed cluster."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.integration.conftest import Sandbox
from tests.integration.slurm.conftest import node_container, run_slurm_play, with_slurm

pytestmark = pytest.mark.integration


def on(sandbox: Sandbox, node: str, *command: str) -> subprocess.CompletedProcess[str]:
    container = node_container(sandbox, node)
    return subprocess.run(["docker", "exec", container, *command], capture_output=True, text=True, timeout=60)


def munge_keys(sandbox: Sandbox) -> set[str]:
    return {on(sandbox, n, "sha256sum", "/etc/munge/munge.key").stdout.split()[0] for n in ("node1", "node2")}


def changed_counts(output: str) -> dict[str, int]:
    return {host: int(n) for host, n in re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", output, re.M)}


def test_cluster_runs_jobs_on_both_nodes(slurm_cluster: Sandbox) -> None:
    sinfo = on(slurm_cluster, "node1", "sinfo", "--noheader", "--Node", "--format", "%N %t %P")
    assert sinfo.stdout.split("\n")[:2] == ["node1 idle gpu*", "node2 idle gpu*"], sinfo.stdout
    job = on(slurm_cluster, "node1", "srun", "--nodes=2", "--ntasks-per-node=1", "--time=1", "hostname")
    assert sorted(job.stdout.split()) == ["node1", "node2"], job.stderr
    # Debian's packages, the version Debian 12 ships.
    version = on(slurm_cluster, "node2", "dpkg-query", "-W", "-f", "${Version}", "slurmd")
    assert version.stdout.startswith("22.05.8-"), version
    key = on(slurm_cluster, "node2", "stat", "-c", "%a %U %G", "/etc/munge/munge.key")
    assert key.stdout.strip() == "400 munge munge"
    assert len(munge_keys(slurm_cluster)) == 1, "the nodes have different munge keys"
    conf = on(slurm_cluster, "node1", "cat", "/etc/slurm/slurm.conf").stdout
    assert "ProctrackType=proctrack/linuxproc" in conf and "SlurmdParameters=config_overrides" in conf
    node_line = (
        r"^NodeName=node2 NodeAddr=\S+ CPUs=\d+ Sockets=\d+ CoresPerSocket=\d+ ThreadsPerCore=\d+ "
        r"RealMemory=\d+ State=UNKNOWN$"
    )
    assert re.search(node_line, conf, re.M), conf


def test_second_run_changes_nothing_and_check_mode_is_clean(slurm_cluster: Sandbox) -> None:
    code, output = run_slurm_play(slurm_cluster, slurm_cluster.inventory)
    assert code == 0, output
    assert changed_counts(output) == {"node1": 0, "node2": 0}, output
    code, output = run_slurm_play(slurm_cluster, slurm_cluster.inventory, "--check")
    assert code == 0, output
    assert changed_counts(output) == {"node1": 0, "node2": 0}, output


def test_rerun_repairs_a_drifted_munge_key(slurm_cluster: Sandbox) -> None:
    on(slurm_cluster, "node2", "sh", "-c", "head -c 1024 /dev/urandom > /etc/munge/munge.key")
    code, output = run_slurm_play(slurm_cluster, slurm_cluster.inventory)
    assert code == 0, output  # verify ran a job and saw node2 idle again: munge agrees once more
    assert "RUNNING HANDLER [slurm : Restart munge]" in output
    assert len(munge_keys(slurm_cluster)) == 1


def test_a_node_slurmctld_drained_itself_fails_verify(slurm_cluster: Sandbox) -> None:
    """slurmctld drains a node that registers less than slurm.conf gives it, as SlurmUser (here done by
    hand as that user: the reason's user is what tells it from an administrator's drain, sinfo(1) %u)."""
    why = "gres/gpu count reported lower than configured (0 < 8)"
    drained = on(slurm_cluster, "node1", "runuser", "-u", "slurm", "--", "scontrol", "update",
                 "nodename=node2", "state=drain", f"reason={why}")  # fmt: skip
    assert drained.returncode == 0, drained.stderr
    try:
        code, output = run_slurm_play(slurm_cluster, slurm_cluster.inventory)
        assert code != 0, output
        assert "Check that slurmctld drained no node itself" in output and why in output, output
    finally:
        on(slurm_cluster, "node1", "scontrol", "update", "nodename=node2", "state=resume")


def test_mixed_releases_are_refused_naming_the_hosts(mixed_sandbox: Sandbox) -> None:
    """Check mode on the stand-ins: Debian 12 and Rocky 9 (EPEL 9) have 22.05, Ubuntu 22.04 has 21.08.
    The Ubuntu and Rocky stand-ins cannot install real Slurm here, so their branches run in check mode."""
    inventory = with_slurm(mixed_sandbox.inventory, "slurm-mixed-inventory.ini")
    code, output = run_slurm_play(mixed_sandbox, inventory, "--check")
    assert code != 0
    assert "21.08: node2" in output and "22.05: node1, node3" in output, output
