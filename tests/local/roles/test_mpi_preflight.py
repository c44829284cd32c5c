"""The mpi role refuses, before installing anything, a lock whose Open MPI series the host's OS does not ship,
naming the host, what its OS ships and what the lock asks for (the releases from the role's own vars/)."""

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
