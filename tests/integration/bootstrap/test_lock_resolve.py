"""`gpuprov lock resolve` on the mixed sandbox (debian12, ubuntu22.04, rocky9 nodes): it reads the sandbox
mirror's debian12, ubuntu2204 and rhel9 repositories and its wheel index through the nodes, and bootstrap
accepts what it writes (its preflight, and every role's check-mode run against the mirror's packages).

The mirror's stand-ins carry CUDA 12.4.1-12.8.1, drivers up to 580 (590 on the apt repositories), one cuDNN
(9.5.1.17, to CUDA 12.6) and the CPU build of torch: the newest lock they all fit is CUDA 12.6.3, with R580's
580.126.09 (R590 is past its end of life and not on rhel9; R580 is in support to June 2028).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuprov import lock
from tests.integration.bootstrap.conftest import bootstrap
from tests.integration.conftest import Sandbox, gpuprov

pytestmark = pytest.mark.integration


def test_the_resolved_lock_is_accepted_by_bootstrap(mixed_sandbox: Sandbox, tmp_path: Path) -> None:
    target = tmp_path / "lock.yml"
    proc = gpuprov("lock", "resolve", str(mixed_sandbox.inventory), "-o", str(target), env=mixed_sandbox.env,
                   check=False, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stack = yaml.safe_load(target.read_text())["gpu_stack"]
    assert lock.check(stack) == []
    # what the mirror's stand-ins carry on all three repositories (see the module's docstring)
    assert (stack["cuda_version"], stack["cudnn_version"], stack["nccl_version"]) == (
        "12.6.3",
        "9.5.1.17",
        "2.23.4",
    )
    assert (stack["driver_version"], stack["pytorch_cuda_tag"]) == ("580.126.09", "cpu")
    result = bootstrap(mixed_sandbox, "-e", f"@{target}", "--check", timeout=1500)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.summary()
    assert summary["check"] is True
    hosts = summary["hosts"]
    assert sorted(hosts) == ["node1", "node2", "node3"]
    assert all(host["failed"] == 0 for host in hosts.values()), hosts
    assert all(host["changed"] > 0 for host in hosts.values()), hosts  # the roles ran: they would install
    print(proc.stderr, target.read_text(), {name: host["changed"] for name, host in hosts.items()}, sep="\n")


def test_a_cuda_the_debian12_repository_lacks_fails_one_line_per_host(
    mixed_sandbox: Sandbox, tmp_path: Path
) -> None:
    target = tmp_path / "lock.yml"
    proc = gpuprov("lock", "resolve", str(mixed_sandbox.inventory), "--cuda", "12.2", "-o", str(target),
                   env={**mixed_sandbox.env, "COLUMNS": "300"}, check=False, timeout=600)  # fmt: skip
    assert proc.returncode == 7, proc.stdout + proc.stderr
    shown = proc.stdout + proc.stderr
    # NVIDIA's debian12 repository starts at CUDA 12.3 (the table's os_repositories; the mirror follows it)
    assert (
        "(debian12): no lock fits: debian12 carries no CUDA 12.2 release that the table lists for it" in shown
    )
    assert (
        "(ubuntu2204): no lock fits: ubuntu2204 carries CUDA 12.2.2, which some other OS here does not"
        in shown
    )
    assert not target.exists()
