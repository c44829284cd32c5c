"""The GPU generation against the lock, on a real sandbox node that presents a stand-in GPU (a real GPU's
PCI ids and nvidia-smi identity: tests/integration/standin_gpus.py).

node3 of the session's deb_sandbox (the bootstrap tests leave it fresh) shows one Tesla V100 SXM2 16GB:
`gpuprov bootstrap` with a CUDA 13 lock stops in preflight (exit 7, one line naming the GPU, the lock fields
and what would work) before anything reaches the host, and `gpuprov lock check` reports the same without a
run; the same node showing an H100 takes the lock. The GPU is taken away again after each test.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from gpuprov import hosts
from tests.integration import standin_gpus
from tests.integration.bootstrap.conftest import ROLE_FILE, ROOT, bootstrap, latest_run, on_node
from tests.integration.conftest import Sandbox, gpuprov
from tests.integration.standin_gpus import StandinGpu
from tests.locks import CUDA13

pytestmark = pytest.mark.integration

V100_LINE = (
    "node3 ({address}:22): 1x Tesla V100 SXM2 16GB (Volta, 10de:1db1): cuda_version 13.0.2: CUDA 12.x is the "
    "last for Volta; lock a CUDA 12.x release (newest in the table: "
)


@pytest.fixture
def lock_file(tmp_path: Path) -> Path:
    path = tmp_path / "lock.yml"
    path.write_text(yaml.safe_dump({"gpu_stack": CUDA13}))
    return path


@pytest.fixture
def shows(deb_sandbox: Sandbox) -> Iterator[Callable[[StandinGpu], None]]:
    """Call with a StandinGpu: node3 shows one of it until the test ends."""

    def present(gpu: StandinGpu) -> None:
        done = on_node(deb_sandbox, "node3", " && ".join(gpu.present(1)))
        assert done.returncode == 0, done.stderr

    yield present
    on_node(deb_sandbox, "node3", " ; ".join(standin_gpus.remove()))


def test_a_v100_refuses_a_cuda_13_lock_before_anything_is_applied(
    deb_sandbox: Sandbox, lock_file: Path, shows: Callable[[StandinGpu], None]
) -> None:
    shows(standin_gpus.V100_SXM2_16GB)
    before = on_node(deb_sandbox, "node3", f"ls -la --time-style=full-iso {ROLE_FILE} 2>&1; dpkg -l | md5sum")
    result = bootstrap(deb_sandbox, "-e", f"@{lock_file}", "--limit", "node3")
    assert result.returncode == 7, result.stderr
    address = hosts.load(deb_sandbox.inventory).host("node3").address
    (line,) = result.error_lines()
    assert line.startswith("error: " + V100_LINE.format(address=address)), line
    assert "driver_flavor open: the open kernel modules need Turing or newer" in line
    assert "pytorch_cuda_tag cu130: PyTorch's CUDA 13 wheels carry kernels for Turing and newer" in line
    assert line.endswith("; nothing was applied to any host")
    run = latest_run(result.state_dir)
    assert not (run / "stdout").exists(), "ansible-runner started"
    preflight = result.summary()["preflight"]["hosts"]["node3"]
    assert preflight["gpus"] == ["10de:1db1"] and [p["check"] for p in preflight["problems"]] == ["gpu"]
    after = on_node(deb_sandbox, "node3", f"ls -la --time-style=full-iso {ROLE_FILE} 2>&1; dpkg -l | md5sum")
    assert after.stdout == before.stdout


def lock_check(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return gpuprov("lock", "check", *args, env=sandbox.env, check=False, timeout=300)


def test_lock_check_says_the_same_and_an_h100_takes_the_lock(
    deb_sandbox: Sandbox, lock_file: Path, shows: Callable[[StandinGpu], None]
) -> None:
    shows(standin_gpus.V100_SXM2_16GB)
    refused = lock_check(
        deb_sandbox, str(lock_file), str(deb_sandbox.inventory), "--limit", "node3", "--json"
    )
    assert refused.returncode == 7, refused.stderr
    answer = json.loads(refused.stdout)
    (problem,) = answer["hosts"]["node3"]["problems"]
    assert problem["check"] == "gpu" and problem["message"].startswith("1x Tesla V100 SXM2 16GB (Volta")
    on_node(deb_sandbox, "node3", " ; ".join(standin_gpus.remove()))
    shows(standin_gpus.H100_SXM5_80GB)
    fits = lock_check(deb_sandbox, str(lock_file), str(deb_sandbox.inventory), "--limit", "node3")
    assert fits.returncode == 0, fits.stderr
    assert "1x H100 SXM5 80GB (Hopper, 10de:2330)" in fits.stdout + fits.stderr
    assert "The lock fits all 1 host(s); nothing was changed on any host" in fits.stderr


def test_plain_ansible_playbook_stops_in_the_validation_play(
    deb_sandbox: Sandbox, lock_file: Path, shows: Callable[[StandinGpu], None]
) -> None:
    """site.yml's first plays (validate_inventory_and_lock.yml) refuse the same host without gpuprov's CLI."""
    shows(standin_gpus.V100_SXM2_16GB)
    playbook = ROOT / "playbooks" / "validate_inventory_and_lock.yml"
    proc = deb_sandbox.playbook(playbook, "-e", f"@{lock_file}", "--limit", "node3", check=False)
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "node3: 1x Tesla V100 SXM2 16GB (Volta, 10de:1db1): cuda_version 13.0.2" in proc.stdout, (
        proc.stdout[-4000:]
    )
