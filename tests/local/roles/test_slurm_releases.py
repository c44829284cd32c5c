"""The slurm role's per-release facts: each supported release loads the Slurm release its distribution
ships (roles/slurm/vars, sources there), and a cluster whose hosts would get different releases is refused,
naming the hosts of each; Ubuntu 20.04's 19.05 among them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.local.roles.local_play import ROLES, role_task, run_play

VARS = ROLES / "slurm" / "vars"

RELEASES = [  # (distribution, os_family, major version, the Slurm release it ships)
    ("Ubuntu", "Debian", "20", "19.05"),
    ("Ubuntu", "Debian", "22", "21.08"),
    ("Ubuntu", "Debian", "24", "23.11"),
    ("Debian", "Debian", "12", "22.05"),
    ("Rocky", "RedHat", "8", "20.11"),
    ("Rocky", "RedHat", "9", "22.05"),
]


@pytest.mark.parametrize(("distribution", "family", "major", "release"), RELEASES)
def test_each_release_loads_the_slurm_release_it_ships(
    tmp_path: Path, distribution: str, family: str, major: str, release: str
) -> None:
    tasks = [
        role_task("slurm", "preflight.yml", "Load the Slurm release"),
        {"name": "Show", "ansible.builtin.debug": {"msg": "release={{ __slurm_distribution_release }}"}},
    ]
    facts = {"distribution": distribution, "os_family": family, "distribution_major_version": major}
    proc = run_play(tmp_path, tasks, {"ansible_facts": facts, "role_path": str(ROLES / "slurm")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"msg": "release={release}"' in proc.stdout, proc.stdout


def shipped(vars_file: str) -> str:
    release = yaml.safe_load((VARS / vars_file).read_text())["__slurm_distribution_release"]
    assert isinstance(release, str)
    return release


def refusal(tmp_path: Path, cluster: dict[str, str]) -> tuple[int, str]:
    """The release check for a cluster of hosts (name: the vars file its distribution loads), each host added
    to the play with the release its file records; the exit code and output of the run."""
    task = role_task("slurm", "release-checks.yml", "Check that every host gets the same Slurm release")
    add_hosts = [
        {
            "name": f"Add {host}",
            "ansible.builtin.add_host": {"name": host, "__slurm_distribution_release": shipped(vars_file)},
        }
        for host, vars_file in cluster.items()
    ]
    proc = run_play(
        tmp_path, [*add_hosts, task], {"__slurm_cluster_hosts": list(cluster), "slurm_package_repository": ""}
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_a_cluster_of_focal_hosts_passes(tmp_path: Path) -> None:
    code, output = refusal(tmp_path, {"focal1": "Ubuntu-20.yml", "focal2": "Ubuntu-20.yml"})
    assert code == 0, output


def test_focal_beside_jammy_is_refused_naming_each_release_hosts(tmp_path: Path) -> None:
    code, output = refusal(
        tmp_path, {"focal1": "Ubuntu-20.yml", "jammy1": "Ubuntu-22.yml", "focal2": "Ubuntu-20.yml"}
    )
    assert code != 0
    assert (
        "different Slurm releases from their distributions: 19.05: focal1, focal2; 21.08: jammy1." in output
    )


def test_focal_beside_debian12_and_noble_is_refused(tmp_path: Path) -> None:
    code, output = refusal(
        tmp_path, {"focal1": "Ubuntu-20.yml", "bookworm1": "Debian-12.yml", "noble1": "Ubuntu-24.yml"}
    )
    assert code != 0
    assert "19.05: focal1; 22.05: bookworm1; 23.11: noble1." in output
