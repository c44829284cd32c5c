"""One table of supported operating systems (roles/gpuprov_platform/vars/main.yml): the gpuprov_platform
role's check and the preflight's (gpuprov.platforms) accept exactly the same hosts, and every role's Galaxy
metadata lists the table's platforms."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml

from gpuprov import host_preflight as preflight
from gpuprov import platforms, resources

ROLES = resources.data_dir("roles")
TABLE = yaml.safe_load((ROLES / "gpuprov_platform" / "vars" / "main.yml").read_text())
ASSERT = next(
    t
    for t in yaml.safe_load((ROLES / "gpuprov_platform" / "tasks" / "main.yml").read_text())
    if "ansible.builtin.assert" in t
)

# (Ansible's distribution, distribution_version; /etc/os-release's ID, VERSION_ID) of real releases.
HOSTS = [
    ("Ubuntu", "20.04", "ubuntu", "20.04"),
    ("Ubuntu", "22.04", "ubuntu", "22.04"),
    ("Ubuntu", "24.04", "ubuntu", "24.04"),
    ("Ubuntu", "22.10", "ubuntu", "22.10"),
    ("Ubuntu", "18.04", "ubuntu", "18.04"),
    ("Debian", "12.8", "debian", "12"),
    ("Debian", "11.11", "debian", "11"),
    ("Debian", "13.1", "debian", "13"),
    ("Rocky", "8.10", "rocky", "8.10"),
    ("Rocky", "9.4", "rocky", "9.4"),
    ("Rocky", "10.0", "rocky", "10.0"),
    ("RedHat", "8.9", "rhel", "8.9"),
    ("RedHat", "9.4", "rhel", "9.4"),
    ("RedHat", "7.9", "rhel", "7.9"),
    ("AlmaLinux", "9.4", "almalinux", "9.4"),
    ("CentOS", "7.9.2009", "centos", "7"),
]
ACCEPTED = {
    ("Ubuntu", "20.04"),
    ("Ubuntu", "22.04"),
    ("Ubuntu", "24.04"),
    ("Debian", "12.8"),
    ("Rocky", "8.10"),
    ("Rocky", "9.4"),
    ("RedHat", "8.9"),
    ("RedHat", "9.4"),
}


def role_accepts(distribution: str, version: str) -> bool:
    """The role's assert, its conditions rendered as Ansible renders them (Jinja expressions)."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    facts = {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": version.split(".")[0],
    }
    context: dict[str, object] = {"ansible_facts": facts, **TABLE}
    for name, expression in ASSERT["vars"].items():  # rendered to text, which Ansible reads back as data
        context[name] = yaml.safe_load(env.from_string(expression).render(context).strip())
    conditions = ASSERT["ansible.builtin.assert"]["that"]
    return all(env.compile_expression(" ".join(c.split()))(**context) for c in conditions)


@pytest.mark.parametrize(("distribution", "version", "os_id", "version_id"), HOSTS)
def test_role_and_preflight_accept_the_same_hosts(
    distribution: str, version: str, os_id: str, version_id: str
) -> None:
    wanted = (distribution, version) in ACCEPTED
    assert role_accepts(distribution, version) is wanted
    assert (platforms.find(os_id, version_id) is not None) is wanted
    os_release = f'NAME="{distribution}"\nID={os_id}\nVERSION_ID="{version_id}"\n'
    assert (preflight.check_os(os_release)[1] is None) is wanted


def test_rhel_is_accepted_by_the_preflight_as_by_the_roles() -> None:
    """RHEL 9 passed the roles but failed the preflight when the preflight had its own table."""
    rhel = 'NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.4"\n'
    assert preflight.check_os(rhel) == ("Red Hat Enterprise Linux 9.4", None)


def test_the_message_lists_the_table() -> None:
    assert platforms.describe() == "Ubuntu 20.04/22.04/24.04, Debian 12, Rocky 8/9, RedHat 8/9"


@pytest.mark.parametrize("role", sorted(p for p in ROLES.iterdir() if (p / "meta" / "main.yml").is_file()),
                         ids=lambda p: p.name)  # fmt: skip
def test_galaxy_platforms_match_the_table(role: Path) -> None:
    meta = yaml.safe_load((role / "meta" / "main.yml").read_text())
    listed = {(p["name"], str(v)) for p in meta["galaxy_info"]["platforms"] for v in p["versions"]}
    table = {(p.galaxy[0], v) for p in platforms.supported() for v in p.galaxy[1]}
    assert listed == table


def test_every_role_depends_on_the_platform_check() -> None:
    """Directly, or through nvidia_repository (which depends on it)."""
    for role in ROLES.iterdir():
        meta_file = role / "meta" / "main.yml"
        if not meta_file.is_file() or role.name == "gpuprov_platform":
            continue
        dependencies = [d["role"] for d in yaml.safe_load(meta_file.read_text())["dependencies"]]
        assert dependencies in (["gpuprov_platform"], ["nvidia_repository"]), role.name
    repository = yaml.safe_load((ROLES / "nvidia_repository" / "meta" / "main.yml").read_text())
    assert [d["role"] for d in repository["dependencies"]] == ["gpuprov_platform"]
