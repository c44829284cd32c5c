"""NCCL_IB_HCA checked against the hosts' RDMA devices in launch's preflight, on the real 2-node sandbox: its
nodes have no /sys/class/infiniband devices, as a host without InfiniBand or RoCE cards."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Sandbox
from tests.integration.launch.conftest import REPO, container, docker_exec, gp

pytestmark = pytest.mark.integration

EXAMPLE = str(REPO / "examples" / "train_ddp.py")


def test_an_nccl_ib_hca_that_picks_no_device_stops_the_job(launch_sandbox: Sandbox) -> None:
    proc = gp(launch_sandbox, "launch", "--nodes", "2", "--env", "NCCL_IB_HCA==mlx5_0:1", EXAMPLE)
    assert proc.returncode == 7, proc.stderr
    assert "Traceback" not in proc.stderr
    # Two problems: a table, its cells wrapped at words; read it with the borders and line breaks folded.
    flat = " ".join(proc.stderr.replace("│", " ").replace("|", " ").split())
    assert flat.count("(from launch --env) names no RDMA device of the host for mlx5_0:1") == 2, proc.stderr
    assert "it has no RDMA device (/sys/class/infiniband is empty)" in flat


def test_the_hosts_nccl_conf_is_read_as_nccl_reads_it(launch_sandbox: Sandbox) -> None:
    node2 = container(launch_sandbox, "node2")
    conf = "/home/gpuprov/.nccl.conf"
    assert (
        docker_exec(node2, "sh", "-c", f"echo NCCL_IB_HCA=mlx5 > {conf} && chown gpuprov {conf}").returncode
        == 0
    )
    try:
        proc = gp(launch_sandbox, "launch", "--nodes", "2", EXAMPLE)
        assert proc.returncode == 7, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, proc.stderr
        assert (
            f"node2: NCCL_IB_HCA='mlx5' (from {conf}) names no RDMA device of the host for mlx5" in errors[0]
        )
        assert "node1: NCCL_IB_HCA" not in proc.stderr
    finally:
        docker_exec(node2, "rm", "-f", conf)
