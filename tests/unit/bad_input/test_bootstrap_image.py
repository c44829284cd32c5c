"""bootstrap refuses a lock whose container image is not pinned by digest, or that the locked driver cannot
run: one line per problem naming the hosts, exit 2, and no Ansible run begins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuprov import host_preflight as preflight
from gpuprov import hosts
from gpuprov.errors import ExitCode
from tests.unit import in_process
from tests.unit.bad_input.test_bootstrap_inventory_sandbox import SAMPLE, inventory

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(autouse=True)
def hosts_that_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every host passes its own checks, so the lock is preflight's only problem (exit 2, not 6 or 7)."""

    def ready(host: hosts.Host, extravars: object, also: object = None) -> preflight.HostReport:
        return preflight.HostReport(host.name, "Debian 12", (), ("debian", "12"))

    monkeypatch.setattr(preflight, "check_host", ready)


def _refused_lock(tmp_path: Path, image: str) -> list[str]:
    """bootstrap with the sample lock plus this image: exit 2, no run of Ansible; the lock's problems."""
    stack = yaml.safe_load((SAMPLE / "group_vars" / "all" / "gpu_stack.yml").read_text())["gpu_stack"]
    # R550: older than NGC 25.12 needs (the sample lock's R580 runs it through forward compatibility).
    stack |= {"driver_branch": "550", "driver_version": "550.127.08"}
    lock_file = tmp_path / "lock.yml"
    lock_file.write_text(yaml.safe_dump({"gpu_stack": {**stack, "container_image": image}}))
    state = tmp_path / "state"
    path = inventory(tmp_path / "inv")
    result = in_process.gpuprov(
        "bootstrap", str(path), "-e", f"@{lock_file}", env={"GPUPROV_STATE_DIR": str(state)}
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == ExitCode.BAD_INPUT, result.stdout + result.stderr
    (summary,) = state.glob("runs/*/summary.json")
    recorded = json.loads(summary.read_text())
    assert recorded["status"] == "preflight_failed"
    assert not (summary.parent / "artifacts").exists()  # ansible-runner never started
    problems = recorded["preflight"]["lock_problems"]
    assert all(p["host"] == "(lock: all hosts)" for p in problems)
    return [p["message"] for p in problems]


def test_a_tag_without_a_digest_is_refused_before_any_host_is_touched(tmp_path: Path) -> None:
    image = "nvcr.io/nvidia/pytorch:24.05-py3"
    (problem,) = _refused_lock(tmp_path, image)
    assert problem.startswith(f"gpu_stack.container_image {image} has a tag but no digest")


def test_an_image_the_locked_driver_cannot_run_is_refused(tmp_path: Path) -> None:
    (problem,) = _refused_lock(tmp_path, f"nvcr.io/nvidia/pytorch:25.12-py3@{DIGEST}")
    assert problem.startswith("driver_version 550.127.08 cannot run NGC PyTorch 25.12 (CUDA 13.1.0)")
