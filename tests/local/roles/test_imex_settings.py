"""nvidia_driver's IMEX settings check (tasks/preflight.yml), run by real ansible-playbook on this machine:
IMEX needs the NVLink domain's node addresses and a branch NVIDIA packages nvidia-imex for (R550 on apt,
R570 on dnf: vars/Debian.yml and vars/RedHat.yml), and says what to change when either is missing."""

from __future__ import annotations

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import CaseResult, role_task, run_cases

VARS = resources.data_dir("roles") / "nvidia_driver" / "vars"
NODES = ["10.0.0.1", "10.0.0.2", "fd00::3"]

# case: (family vars file, branch, nodes)
CASES = {
    "apt-550": ("Debian.yml", "550", NODES),
    "dnf-570": ("RedHat.yml", "570", NODES),
    "dnf-550": ("RedHat.yml", "550", NODES),
    "no-nodes": ("Debian.yml", "580", []),
    "a-name": ("Debian.yml", "580", ["10.0.0.1", "node2"]),
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    tmp_path = tmp_path_factory.mktemp("imex")
    cases = {
        name: {
            "__nvidia_driver_imex_min_branch": yaml.safe_load((VARS / family).read_text())[
                "__nvidia_driver_imex_min_branch"
            ],
            "nvidia_driver_branch": branch,
            "nvidia_driver_imex_nodes": nodes,
        }
        for name, (family, branch, nodes) in CASES.items()
    }
    tasks = [role_task("nvidia_driver", "preflight.yml", "Check the IMEX settings")]
    # ansible_facts as a play variable (a host's is replaced by its facts); it only names the family in the
    # message, the minimum branch is each case's own.
    play_vars = {"nvidia_driver_imex": True, "ansible_facts": {"os_family": "Debian"}}
    return run_cases(tmp_path, tasks, cases, play_vars=play_vars)


@pytest.mark.parametrize("case", ["apt-550", "dnf-570"])
def test_addresses_and_a_packaged_branch_pass(checked: dict[str, CaseResult], case: str) -> None:
    assert not checked[case].failed, checked[case].output[-2000:]


@pytest.mark.parametrize("case", ["dnf-550", "no-nodes", "a-name"])
def test_what_is_missing_is_refused_saying_what_to_change(checked: dict[str, CaseResult], case: str) -> None:
    result = checked[case]
    assert result.failed
    assert "nvidia_driver_imex_nodes must list the IP" in result.output
    assert "turn nvidia_driver_imex off" in result.output
