"""nvidia_driver's kernel-drift check (tasks/kernel-drift.yml), run by real ansible-playbook on this machine
with the kernel package listings given: a newer kernel pulled in beside the running one (EL9's
kernel-devel-matched) is told apart from a real drift, and each message says what to do."""

from __future__ import annotations

import os

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import CaseResult, run_cases

TASKS = resources.data_dir("roles") / "nvidia_driver" / "tasks" / "kernel-drift.yml"
VARS = resources.data_dir("roles") / "nvidia_driver" / "vars" / "RedHat-9.yml"
BEFORE = ["kernel-core 5.14.0-427.13.1.el9_4"]


RUNNING = "5.14.0-427.13.1.el9_4.x86_64"
NEWER = "kernel-core 5.14.0-503.11.1.el9_5"
# case: (the kernel packages listed after the install, nvidia_driver_allow_kernel_change)
CASES = {
    "no-change": (BEFORE, False),
    "newer-pulled-in": ([*BEFORE, NEWER], False),
    "replaced": ([NEWER], False),
    "allowed": ([*BEFORE, NEWER], True),
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    """kernel-drift.yml for every case above in one ansible-playbook run (run_cases): the facts, the listing
    before and RedHat-9's vars are the play's, the listing after and the setting each case's own."""
    tmp_path = tmp_path_factory.mktemp("drift")
    play_vars = {
        **yaml.safe_load(VARS.read_text()),
        "ansible_facts": {"kernel": RUNNING},
        "__nvidia_driver_kernels_before": {"stdout_lines": BEFORE},
    }
    cases = {
        name: {
            "nvidia_driver_allow_kernel_change": allow,
            # The query prints the listing after the install; uname -r is replaced too.
            "__nvidia_driver_kernel_query": "printf '%s\\n' " + " ".join(f"'{a}'" for a in after),
        }
        for name, (after, allow) in CASES.items()
    }
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "uname").write_text(f"#!/bin/sh\necho {RUNNING}\n")
    (fake_bin / "uname").chmod(0o755)
    paths = dict.fromkeys(CASES, f"{fake_bin}:{os.environ['PATH']}")
    tasks = [{"ansible.builtin.include_tasks": str(TASKS)}]
    return run_cases(tmp_path, tasks, cases, paths=paths, play_vars=play_vars)


def test_no_change_passes(checked: dict[str, CaseResult]) -> None:
    assert not checked["no-change"].failed, checked["no-change"].output[-2000:]


def test_newer_kernel_pulled_in_says_update_and_reboot_first(checked: dict[str, CaseResult]) -> None:
    result = checked["newer-pulled-in"]
    assert result.failed
    assert "brought a newer kernel" in result.output
    assert "kernel-devel-matched" in result.output
    assert "Update the kernel and reboot first" in result.output and "dnf update 'kernel*'" in result.output


def test_replaced_kernel_is_a_real_drift(checked: dict[str, CaseResult]) -> None:
    result = checked["replaced"]
    assert result.failed
    assert "changed the kernel" in result.output and "brought a newer kernel" not in result.output


def test_allowed_kernel_change_passes(checked: dict[str, CaseResult]) -> None:
    assert not checked["allowed"].failed, checked["allowed"].output[-2000:]
