"""`gpuprov check --only bandwidth` on the three nodes of the Debian sandbox with node3's interface slowed by
`tc`: the all-hosts all-reduce misses the threshold and the pair measurements (each host with its next, in
one job: a ring of pairs) name node3. The threshold sits between the healthy figure, measured first in the
same test, and the rate tc allows. node3 gets only what launch needs (network_tuning and python_env), so the
bootstrap tests still find it without the NVIDIA stack; the qdisc is removed after, whatever happens."""

from __future__ import annotations

import json
import math
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov import resources
from tests.integration.check.test_check import check, node_shell
from tests.integration.conftest import BootstrapRun, Sandbox

pytestmark = pytest.mark.integration
PLAYBOOK = Path(__file__).parent / "playbooks" / "launch_ready.yml"
SLOW_MBIT = 100  # node3's egress under tc's token bucket: 12.5 MB/s, far below a container bridge's rate


@pytest.fixture(scope="module")
def three_ready(deb_sandbox: Sandbox, first_bootstrap: BootstrapRun) -> Sandbox:
    assert first_bootstrap.returncode == 0, f"bootstrap of node1 and node2 failed:\n{first_bootstrap.stderr}"
    env = {
        **deb_sandbox.env,
        "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles")),
        "ANSIBLE_PIPELINING": "1",
    }
    node3 = Sandbox(deb_sandbox.name, deb_sandbox.inventory, env)
    node3.playbook(PLAYBOOK, "--limit", "node3")
    return deb_sandbox


def bandwidth(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return check(sandbox, "--only", "bandwidth", *args, limit="node1,node2,node3")


@pytest.fixture
def node3_slowed(three_ready: Sandbox) -> Iterator[Sandbox]:
    """node3's interface towards node1 limited to SLOW_MBIT by a tbf root qdisc (`tc add` refuses to
    replace one already there); removed after."""
    node1 = re.search(r"^node1 ansible_host=(\S+)", three_ready.inventory.read_text(), re.MULTILINE)
    assert node1 is not None
    route = node_shell(three_ready, "node3", f"ip -o route get {node1.group(1)}")
    device = route.split(" dev ", 1)[1].split()[0]
    node_shell(
        three_ready,
        "node3",
        f"tc qdisc add dev {device} root tbf rate {SLOW_MBIT}mbit burst 32kbit latency 400ms",
    )
    try:
        yield three_ready
    finally:
        node_shell(three_ready, "node3", f"tc qdisc del dev {device} root")


def median(result: dict[str, str]) -> float:
    return float(result["measured"].split()[0])


def test_the_pair_measurements_name_the_slowed_host(
    three_ready: Sandbox, request: pytest.FixtureRequest
) -> None:
    healthy_proc = bandwidth(three_ready)
    assert healthy_proc.returncode == 0, healthy_proc.stderr
    (healthy,) = [r for r in json.loads(healthy_proc.stdout)["results"] if r["check"] == "bandwidth"]
    slow_gbps = SLOW_MBIT / 8 / 1000
    # 0.2-0.5 GB/s here on a loaded 2-core machine: 16-40 times what tc lets through.
    assert median(healthy) > 10 * slow_gbps, f"the healthy figure is too low to tell a slowed host: {healthy}"
    # Halfway between the two on a log scale, so at least ~3x from each.
    threshold = math.sqrt(median(healthy) * slow_gbps)

    request.getfixturevalue("node3_slowed")
    proc = bandwidth(three_ready, "-e", f"gpuprov_check_min_busbw_gbps={threshold:.4f}")
    assert proc.returncode == 1, proc.stderr
    results = {r["host"]: r for r in json.loads(proc.stdout)["results"] if r["check"] == "bandwidth"}
    pairs = {"node1 <-> node2", "node2 <-> node3", "node3 <-> node1"}
    assert set(results) == {"all 3 hosts", *pairs, "node3"}, results
    assert results["all 3 hosts"]["status"] == "fail"
    assert results["node1 <-> node2"]["status"] == "pass"
    assert results["node2 <-> node3"]["status"] == results["node3 <-> node1"]["status"] == "fail"
    assert median(results["node3 <-> node1"]) < threshold < median(results["node1 <-> node2"])
    named = results["node3"]
    assert named["status"] == "fail" and "node3: the slow host" in named["detail"]
    assert "tc" in named["action"]
