"""nvidia_driver refuses, before installing, a lock the apt repositories cannot meet (setup-Debian.yml's
"Refuse a lock the repositories cannot meet", run on localhost against `apt-cache madison` lines). The case
it exists for: nvidia_driver_source: ubuntu, where Ubuntu's archive offers only Canonical's newest build."""

from __future__ import annotations

import pytest

from gpuprov import resources
from tests.local.roles.local_play import CaseResult, role_task, run_cases

TASKS = resources.data_dir("roles") / "nvidia_driver" / "tasks" / "setup-Debian.yml"
ARCHIVE = "http://archive.ubuntu.com/ubuntu jammy-updates/restricted amd64 Packages"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  Packages"


# case: (nvidia_driver_source, the packages, what `apt-cache madison` printed)
CASES: dict[str, tuple[str, list[str], list[str]]] = {
    "canonical-newest": (
        "ubuntu",
        ["nvidia-headless-550-server", "nvidia-utils-550-server"],
        [
            f" nvidia-headless-550-server | 550.127.05-0ubuntu0.22.04.1 | {ARCHIVE}",
            f"    nvidia-utils-550-server | 550.127.05-0ubuntu0.22.04.1 | {ARCHIVE}",
        ],
    ),
    "not-offered": (
        "nvidia",
        ["nvidia-headless-550", "libnvidia-cfg1-550"],
        [f" nvidia-headless-550 | 550.127.08-0ubuntu1 | {NVIDIA}"],
    ),
    "locked-version-offered": (
        "nvidia",
        ["nvidia-headless-550", "nvidia-utils-550"],
        [
            f" nvidia-headless-550 | 550.144.03-0ubuntu1 | {NVIDIA}",
            f" nvidia-headless-550 | 550.127.08-0ubuntu1 | {NVIDIA}",
            f"    nvidia-utils-550 | 550.127.08-0ubuntu1 | {NVIDIA}",
        ],
    ),
    "prefix-only": ("nvidia", ["nvidia-utils-550"], [f" nvidia-utils-550 | 550.127.081-0ubuntu1 | {NVIDIA}"]),
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    """The task alone for every case above, in one ansible-playbook run (run_cases: no role file is
    loaded, the inputs are all the task reads)."""
    task = role_task("nvidia_driver", "setup-Debian.yml", "Refuse a lock")
    cases = {
        name: {
            "nvidia_driver_version": "550.127.08",
            "nvidia_driver_source": source,
            "__nvidia_driver_packages": packages,
            "__nvidia_driver_madison": {"stdout_lines": madison},
        }
        for name, (source, packages, madison) in CASES.items()
    }
    return run_cases(tmp_path_factory.mktemp("lock"), [task], cases)


def test_canonicals_newest_build_does_not_meet_an_nvidia_lock(checked: dict[str, CaseResult]) -> None:
    result = checked["canonical-newest"]
    assert result.failed
    assert "nvidia-headless-550-server is offered at 550.127.05-0ubuntu0.22.04.1" in result.output
    assert "set nvidia_driver_source: nvidia" in result.output


def test_a_package_not_offered_at_all_is_named(checked: dict[str, CaseResult]) -> None:
    result = checked["not-offered"]
    assert result.failed
    assert "libnvidia-cfg1-550 is offered at no version" in result.output


def test_a_repository_with_the_locked_version_passes(checked: dict[str, CaseResult]) -> None:
    result = checked["locked-version-offered"]
    assert not result.failed, result.output[-2000:]


def test_a_version_that_only_starts_like_the_lock_does_not_pass(checked: dict[str, CaseResult]) -> None:
    assert checked["prefix-only"].failed
