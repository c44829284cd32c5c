"""slurm_pyxis checks everything before it touches a host: the locked versions, a SHA-256 for every file it
would download (named after NVIDIA's release files per OS family), the CPU, and a Slurm that can load
pyxis. The role's own tasks run here on localhost, one host per case."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.local.roles.local_play import ROLES, CaseResult, role_task, run_cases

ROLE = ROLES / "slurm_pyxis"
SUM = "sha256:" + "ab" * 32
TARBALL = {"pyxis-0.24.0.tar.gz": SUM}
DEB = {"enroot_4.1.2-1_amd64.deb": SUM, "enroot+caps_4.1.2-1_amd64.deb": SUM, **TARBALL}
RPM = {"enroot-4.1.2-1.el8.x86_64.rpm": SUM, "enroot+caps-4.1.2-1.el8.x86_64.rpm": SUM, **TARBALL}


def case(family: str = "Debian", release: str = "22.05", **settings: Any) -> dict[str, Any]:
    """A case's inputs; its facts (`gpuprov_test_facts`) go to the play of its OS family and CPU."""
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    return {
        **defaults,
        "gpuprov_test_facts": {"os_family": family, "architecture": settings.pop("arch", "x86_64")},
        "__slurm_distribution_release": release,
        "slurm_pyxis_enroot_version": "4.1.2",
        "slurm_pyxis_version": "0.24.0",
        "slurm_pyxis_container_toolkit_version": "1.18.0",
        "slurm_pyxis_checksums": DEB if family == "Debian" else RPM,
        **settings,
    }


CASES: dict[str, dict[str, Any]] = {
    "debian": case(),
    "el": case("RedHat"),
    "arm": case(arch="aarch64", slurm_pyxis_checksums={
        "enroot_4.1.2-1_arm64.deb": SUM, "enroot+caps_4.1.2-1_arm64.deb": SUM, "pyxis-0.24.0.tar.gz": SUM}),
    "no-caps": case(slurm_pyxis_enroot_caps=False, slurm_pyxis_checksums={
        "enroot_4.1.2-1_amd64.deb": SUM, "pyxis-0.24.0.tar.gz": SUM}),
    "caps-unchecked": case(slurm_pyxis_checksums={"enroot_4.1.2-1_amd64.deb": SUM, **TARBALL}),
    "md5": case(slurm_pyxis_checksums={**DEB, "pyxis-0.24.0.tar.gz": "md5:" + "ab" * 16}),
    "focal": case(release="19.05"),
    "site-slurm": case(release="19.05", slurm_package_repository="https://repo.example.com/slurm jammy main"),
    "unlocked": case(slurm_pyxis_version=""),
    "ppc": case(arch="ppc64le"),
    "no-toolkit": case(slurm_pyxis_container_toolkit_version=""),
    "hook-off": case(slurm_pyxis_gpu_hook=False, slurm_pyxis_container_toolkit_version=""),
}  # fmt: skip


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    tasks = [
        {"name": "Load the OS family's settings",
         "ansible.builtin.include_vars": {"file": f"{ROLE}/vars/{{{{ ansible_facts.os_family }}}}.yml"}},
        {"name": "Load the role's settings",
         "ansible.builtin.include_vars": {"file": f"{ROLE}/vars/main.yml"}},
        role_task("slurm_pyxis", "main.yml", "Work out the files to download"),
        {"name": "Show the files",
         "ansible.builtin.debug": {"msg": "files={{ __slurm_pyxis_enroot_files }}"}},
        role_task("slurm_pyxis", "main.yml", "Check the enroot and pyxis settings"),
    ]  # fmt: skip
    # Facts cannot be host variables: one play per OS family and CPU, its facts as the play's variables.
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for name, inputs in CASES.items():
        facts = inputs["gpuprov_test_facts"]
        groups.setdefault(f"{facts['os_family']}-{facts['architecture']}", {})[name] = inputs
    results: dict[str, CaseResult] = {}
    for group, cases in groups.items():
        facts = next(iter(cases.values()))["gpuprov_test_facts"]
        results |= run_cases(tmp_path_factory.mktemp(group), tasks, cases, play_vars={"ansible_facts": facts})
    return results


@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("debian", "['enroot_4.1.2-1_amd64.deb', 'enroot+caps_4.1.2-1_amd64.deb']"),
        ("el", "['enroot-4.1.2-1.el8.x86_64.rpm', 'enroot+caps-4.1.2-1.el8.x86_64.rpm']"),
        ("arm", "['enroot_4.1.2-1_arm64.deb', 'enroot+caps_4.1.2-1_arm64.deb']"),
        ("no-caps", "['enroot_4.1.2-1_amd64.deb']"),
        ("site-slurm", "['enroot_4.1.2-1_amd64.deb', 'enroot+caps_4.1.2-1_amd64.deb']"),
        ("hook-off", "['enroot_4.1.2-1_amd64.deb', 'enroot+caps_4.1.2-1_amd64.deb']"),
    ],
)
def test_every_file_has_its_checksum_and_the_host_passes(
    checked: dict[str, CaseResult], name: str, files: str
) -> None:
    assert not checked[name].failed, checked[name].output
    assert f"files={files}" in checked[name].output


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("caps-unchecked", "a sha256 in slurm_pyxis_checksums for enroot+caps_4.1.2-1_amd64.deb (docs"),
        ("md5", "a sha256 in slurm_pyxis_checksums for pyxis-0.24.0.tar.gz (docs"),
        ("focal", "Slurm 20.02 or later (this host's: 19.05)"),
        ("unlocked", "are '4.1.2' and ''"),
        ("ppc", "a CPU of x86_64, aarch64 (is ppc64le)"),
        ("no-toolkit", "gpu_stack.container_toolkit_version X.Y.Z for nvidia-container-cli (is '')"),
    ],
)
def test_refused_before_anything_in_one_line(checked: dict[str, CaseResult], name: str, says: str) -> None:
    result = checked[name]
    assert result.failed
    assert says in " ".join(result.output.split()), result.output
