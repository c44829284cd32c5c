"""nvidia_driver names the installed driver packages of another branch, flavour or Ubuntu naming scheme for
removal in the install's apt transaction, and nothing else (setup-Debian.yml, "Work out the driver packages to
replace", run on localhost against dpkg-query lines)."""

from __future__ import annotations

import re

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import CaseResult, role_task, run_cases

VARS = resources.data_dir("roles") / "nvidia_driver" / "vars" / "Debian.yml"
R590 = [
    "nvidia-headless-open",
    "nvidia-headless-no-dkms-open",
    "nvidia-dkms-open",
    "nvidia-kernel-source-open",
    "nvidia-kernel-common",
    "nvidia-utils",
    "libnvidia-compute",
    "nvidia-compute-utils",
    "libnvidia-cfg1",
]

# case: (dpkg-query lines, what must be replaced)
CASES: dict[str, tuple[list[str], list[str]]] = {
    "same-set": ([f"{n} hold ok installed" for n in R590], []),
    "r570-set": (
        [
            "nvidia-headless-570-open hold ok installed",
            "libnvidia-compute-570 hold ok installed",
            "nvidia-utils-570 hold ok installed",
        ],
        ["nvidia-headless-570-open", "libnvidia-compute-570", "nvidia-utils-570"],
    ),
    "other-flavour": (["nvidia-dkms hold ok installed"], ["nvidia-dkms"]),
    "server-build": (["nvidia-utils-550-server install ok installed"], ["nvidia-utils-550-server"]),
    "not-the-role's": (
        [
            "nvidia-utils-570 deinstall ok config-files",
            "libnvidia-compute-570-dbg install ok installed",
            "nvidia-dkms-tools install ok installed",
        ],
        [],
    ),
}


@pytest.fixture(scope="module")
def worked_out(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    task = role_task("nvidia_driver", "setup-Debian.yml", "Work out the driver packages to replace")
    show = {
        "name": "Show",
        "ansible.builtin.debug": {"msg": "REPLACED={{ __nvidia_driver_replaced | join(',') }}"},
    }
    pattern = yaml.safe_load(VARS.read_text())["__nvidia_driver_apt_other_names"]
    cases = {
        name: {
            "nvidia_driver_version": "590.48.01",
            "__nvidia_driver_packages": R590,
            "__nvidia_driver_apt_other_names": pattern,
            "__nvidia_driver_others": {"stdout_lines": lines},
        }
        for name, (lines, _) in CASES.items()
    }
    return run_cases(tmp_path_factory.mktemp("replaced"), [task, show], cases)


@pytest.mark.parametrize("case", sorted(CASES))
def test_only_the_compute_sets_other_names_are_replaced(worked_out: dict[str, CaseResult], case: str) -> None:
    result = worked_out[case]
    assert not result.failed, result.output
    shown = re.search(r'REPLACED=([^"]*)"', result.output)
    assert shown, result.output
    assert set(filter(None, shown.group(1).split(","))) == set(
        CASES[case][1]
    )  # Ansible's difference: any order
