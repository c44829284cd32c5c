"""The mpi role refuses, before installing anything, a lock whose Open MPI series the host's OS does not ship,
naming the host, what its OS ships and what the lock asks for (the releases from the role's own vars/), and a
cluster group whose hosts' OS releases ship different Open MPI versions of that series."""

from __future__ import annotations

import pytest
import yaml

from tests.local.roles.local_play import ROLES, CaseResult, role_task, run_cases


def _releases(name: str) -> dict[str, dict[str, str]]:
    data = yaml.safe_load((ROLES / "mpi" / "vars" / f"{name}.yml").read_text())
    return dict(data["__mpi_releases"])


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    tasks = [
        {"ansible.builtin.setup": {"gather_subset": ["min"]}},
        role_task("mpi", "preflight.yml", "Check that the lock names"),
    ]
    cases = {
        "fits": {"__mpi_releases": _releases("Debian-12"), "mpi_openmpi_version": "4.1"},
        "other_series": {"__mpi_releases": _releases("Ubuntu-20"), "mpi_openmpi_version": "4.1"},
        "unset": {"__mpi_releases": _releases("Debian-12"), "mpi_openmpi_version": ""},
        "unrecorded_os": {"mpi_openmpi_version": "4.1"},
    }
    return run_cases(tmp_path_factory.mktemp("mpi-preflight"), tasks, cases)


def test_a_series_the_os_ships_passes(results: dict[str, CaseResult]) -> None:
    assert not results["fits"].failed, results["fits"].output


def test_another_series_is_refused_naming_both(results: dict[str, CaseResult]) -> None:
    result = results["other_series"]
    assert result.failed
    assert (
        "other_series:" in result.output
        and "ships Open MPI 4.0, and the lock asks for series 4.1." in result.output
    )


def test_a_lock_without_the_series_is_refused(results: dict[str, CaseResult]) -> None:
    result = results["unset"]
    assert result.failed
    assert "none (gpu_stack.openmpi_version is not set)" in result.output


def test_an_os_without_a_recorded_release_is_refused(results: dict[str, CaseResult]) -> None:
    result = results["unrecorded_os"]
    assert result.failed
    assert "ships Open MPI that gpuprov has not recorded" in result.output


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    # Each case a host; a cluster is the hosts its __mpi_hosts names, each with its OS release's packages.
    tasks = [role_task("mpi", "preflight.yml", "Check that the cluster's hosts ship one Open MPI version")]
    clusters = {
        "jammy_noble": ["Ubuntu-22", "Ubuntu-24"],
        "two_debian": ["Debian-12", "Debian-12"],
        "two_el9": ["RedHat-9", "RedHat-9"],
    }
    cases = {
        f"{cluster}_{i}": {
            "__mpi_hosts": [f"{cluster}_{j}" for j in range(len(releases))],
            "__mpi_versions": _releases(release)["4.1"],
            "mpi_cluster_group": cluster,
        }
        for cluster, releases in clusters.items()
        for i, release in enumerate(releases)
    }
    return run_cases(tmp_path_factory.mktemp("mpi-mixed"), tasks, cases)


def test_a_cluster_of_two_open_mpi_versions_is_refused_naming_them(mixed: dict[str, CaseResult]) -> None:
    for host in ("jammy_noble_0", "jammy_noble_1"):
        assert mixed[host].failed, mixed[host].output
        assert "would get different Open MPI versions (4.1.2, 4.1.6:" in mixed[host].output


def test_a_cluster_of_one_release_passes(mixed: dict[str, CaseResult]) -> None:
    for host in ("two_debian_0", "two_debian_1", "two_el9_0", "two_el9_1"):
        assert not mixed[host].failed, mixed[host].output
