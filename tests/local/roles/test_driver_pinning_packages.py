"""nvidia_driver removes NVIDIA's driver pinning packages of another branch or release (their APT preferences
would pin apt away from the lock) and keeps the one of the locked branch or version (setup-Debian.yml, "Work
out the pinning packages of another branch or release", run on localhost against dpkg-query lines)."""

from __future__ import annotations

import pytest

from tests.local.roles.local_play import CaseResult, role_task, run_cases

# case: (what `dpkg-query -W -f='${Package} ${Status}\n' 'nvidia-driver-pinning-*'` printed, what must go)
CASES: dict[str, tuple[list[str], list[str]]] = {
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


@pytest.fixture(scope="module")
def worked_out(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    task = role_task("nvidia_driver", "setup-Debian.yml", "Work out the pinning packages")
    show = {
        "name": "Show",
        "ansible.builtin.debug": {"msg": "FOREIGN={{ __nvidia_driver_foreign_pinning | join(',') }}"},
    }
    cases = {
        name: {
            "nvidia_driver_branch": "590",
            "nvidia_driver_version": "590.48.01",
            "__nvidia_driver_pinning": {"stdout_lines": lines},
        }
        for name, (lines, _) in CASES.items()
    }
    return run_cases(tmp_path_factory.mktemp("pinning"), [task, show], cases)


@pytest.mark.parametrize("case", sorted(CASES))
def test_only_the_pinning_packages_of_another_release_go(
    worked_out: dict[str, CaseResult], case: str
) -> None:
    result = worked_out[case]
    assert not result.failed, result.output
    assert f'FOREIGN={",".join(CASES[case][1])}"' in result.output, result.output
