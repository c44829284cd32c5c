"""Which installed packages nvidia_driver's apt install takes away (setup-Debian.yml, run on localhost against
dpkg-query lines): NVIDIA's driver pinning packages of another branch or release (their APT preferences would
pin apt away from the lock; the locked branch's or version's stays), and the compute-only set's packages of
another branch, flavour or Ubuntu naming scheme (named for removal in the install's one apt transaction)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import role_task, run_cases

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

# case: (what `dpkg-query -W -f='${Package} ${Status}\n' 'nvidia-driver-pinning-*'` printed, what must go)
PINNING: dict[str, tuple[list[str], list[str]]] = {
    "none": ([], []),
    "old-branch": (["nvidia-driver-pinning-580 install ok installed"], ["nvidia-driver-pinning-580"]),
    "held-old-release": (
        ["nvidia-driver-pinning-580.126.20 hold ok installed"],
        ["nvidia-driver-pinning-580.126.20"],
    ),
    "locked-branch-and-version": (
        [
            "nvidia-driver-pinning-590 install ok installed",
            "nvidia-driver-pinning-590.48.01 install ok installed",
        ],
        [],
    ),
    "removed-but-configured": (["nvidia-driver-pinning-580 deinstall ok config-files"], []),
    "mixed": (
        ["nvidia-driver-pinning-590 install ok installed", "nvidia-driver-pinning-595 install ok installed"],
        ["nvidia-driver-pinning-595"],
    ),
}

# case: (dpkg-query lines of the compute-only set's globs, what must be replaced)
REPLACED: dict[str, tuple[list[str], list[str]]] = {
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


def worked_out(
    tmp_path: Path, task_prefix: str, fact: str, inputs: dict[str, object], cases: dict
) -> dict[str, set[str]]:
    """The task alone for every case in one ansible-playbook run; what it put in FACT, per case."""
    task = role_task("nvidia_driver", "setup-Debian.yml", task_prefix)
    show = {"name": "Show", "ansible.builtin.debug": {"msg": f"GOES={{{{ {fact} | join(',') }}}}"}}
    results = run_cases(
        tmp_path,
        [task, show],
        {name: {**inputs, "__lines": {"stdout_lines": lines}} for name, (lines, _) in cases.items()},
    )
    found: dict[str, set[str]] = {}
    for name, result in results.items():
        assert not result.failed, result.output
        shown = re.search(r'GOES=([^"]*)"', result.output)
        assert shown, result.output
        found[name] = set(filter(None, shown.group(1).split(",")))  # Ansible's difference: any order
    return found


@pytest.fixture(scope="module")
def pinning(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    inputs = {
        "nvidia_driver_branch": "590",
        "nvidia_driver_version": "590.48.01",
        "__nvidia_driver_pinning": "{{ __lines }}",
    }
    return worked_out(
        tmp_path_factory.mktemp("pinning"),
        "Work out the pinning packages",
        "__nvidia_driver_foreign_pinning",
        inputs,
        PINNING,
    )


@pytest.fixture(scope="module")
def replaced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    inputs = {
        "nvidia_driver_version": "590.48.01",
        "__nvidia_driver_packages": R590,
        "__nvidia_driver_apt_other_names": yaml.safe_load(VARS.read_text())[
            "__nvidia_driver_apt_other_names"
        ],
        "__nvidia_driver_others": "{{ __lines }}",
    }
    return worked_out(
        tmp_path_factory.mktemp("replaced"),
        "Work out the driver packages to replace",
        "__nvidia_driver_replaced",
        inputs,
        REPLACED,
    )


@pytest.mark.parametrize("case", sorted(PINNING))
def test_only_the_pinning_packages_of_another_release_go(pinning: dict[str, set[str]], case: str) -> None:
    assert pinning[case] == set(PINNING[case][1])


@pytest.mark.parametrize("case", sorted(REPLACED))
def test_only_the_compute_sets_other_names_are_replaced(replaced: dict[str, set[str]], case: str) -> None:
    assert replaced[case] == set(REPLACED[case][1])
