"""The slurm role with a repository of the operator's (slurm_package_repository): the release checks read the
release the package manager would install (apt-cache policy: the installed version, else the candidate), so
jammy's own slurmd 21.08.5 behind a SchedMD repository is refused on a cgroup v2 node before anything is
installed (review 26a item 3); slurm_package_flavor=schedmd installs SchedMD's slurm-smd-* names
(SchedMD/slurm debian/control, quickstart_admin.html "Installing Packages"); the slurm user, which SchedMD's
packages do not create, must have one uid across the cluster (slurmd's _slurm_authorized_user)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.local.roles.local_play import ROLES, role_task, run_play

pytestmark = pytest.mark.local

TASKS = ROLES / "slurm" / "tasks"
VARS = ROLES / "slurm" / "vars"
SHOW = "packages={{ __slurm_packages | join(',') }} release={{ __slurm_distribution_release }}"
REPOSITORY = "https://repo.example.com/slurm jammy main"

# apt-cache policy's layout (apt 2.x, as `apt-cache policy bash` prints it); jammy's slurmd is
# 21.08.5-2ubuntu1 in universe (https://packages.ubuntu.com/jammy/slurmd).
JAMMY_SLURMD = """\
slurmd:
  Installed: (none)
  Candidate: 21.08.5-2ubuntu1
  Version table:
     21.08.5-2ubuntu1 500
        500 http://archive.ubuntu.com/ubuntu jammy/universe amd64 Packages
"""


def smd_policy(installed: str, candidate: str, package: str = "slurm-smd-slurmd") -> str:
    return (
        f"{package}:\n  Installed: {installed}\n  Candidate: {candidate}\n  Version table:\n"
        f"     {candidate} 500\n        500 https://repo.example.com/slurm jammy/main amd64 Packages\n"
    )


def tasks_of(name: str, *, without: str = "") -> list[dict[str, Any]]:
    tasks = yaml.safe_load((TASKS / name).read_text())
    return [t for t in tasks if not (without and t["name"].startswith(without))]


def fake_tools(tmp_path: Path, policies: dict[str, str], cgroup_fs: str) -> str:
    """apt-cache answering `policy PKG` with the recorded text for PKG (nothing for another package, as apt
    does), and stat answering /sys/fs/cgroup's type; their directory, to put first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for package, text in policies.items():
        (tmp_path / f"{package}.policy").write_text(text)
    (bin_dir / "apt-cache").write_text(
        f'#!/bin/sh\n[ "$1" = policy ] && [ -f "{tmp_path}/$2.policy" ] && cat "{tmp_path}/$2.policy"\n'
        "exit 0\n"
    )
    (bin_dir / "stat").write_text(f"#!/bin/sh\necho {cgroup_fs}\n")
    for tool in ("apt-cache", "stat"):
        (bin_dir / tool).chmod(0o755)
    return str(bin_dir)


def release_check(
    tmp_path: Path, flavor: str, policies: dict[str, str], cgroup_fs: str = "cgroup2fs"
) -> tuple[int, str]:
    """preflight's package choice, then release.yml and release-checks.yml: a jammy node, a repository."""
    # The host is controller and node: the role reads the first package, slurmctld's, of the same release.
    ctld = {
        name.replace("slurmd", "slurmctld"): text.replace("slurmd:", "slurmctld:", 1)
        for name, text in policies.items()
    }
    bin_dir = fake_tools(tmp_path, {**policies, **ctld}, cgroup_fs)
    tasks = [
        {"name": "Load the family's settings", "ansible.builtin.include_vars": str(VARS / "Debian.yml")},
        role_task("slurm", "preflight.yml", "Work out this host's part"),
        *tasks_of("release.yml", without="Check the Slurm release"),
        *tasks_of("release-checks.yml"),
        {"name": "Show", "ansible.builtin.debug": {"msg": SHOW}},
    ]  # fmt: skip
    facts = {
        "os_family": "Debian",
        "distribution": "Ubuntu",
        "distribution_major_version": "22",
        "hostname": "jammy1",
    }
    extra = {
        "ansible_facts": facts,
        "slurm_controller_group": "ungrouped",
        "slurm_nodes_group": "all",
        "slurm_package_flavor": flavor,
        "slurm_package_repository": REPOSITORY,
        "slurm_container_safe": False,
    }
    proc = run_play(tmp_path, tasks, extra, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return proc.returncode, proc.stdout + proc.stderr


def test_a_schedmd_repository_with_distribution_names_gets_jammys_slurmd_and_is_refused(
    tmp_path: Path,
) -> None:
    code, output = release_check(
        tmp_path,
        "distribution",
        {"slurmd": JAMMY_SLURMD, "slurm-smd-slurmd": smd_policy("(none)", "23.11.4-1")},
    )
    assert code != 0
    assert "localhost booted with the cgroup v2 hierarchy" in output, output
    assert (
        "(21.08)" in output
        and "slurm_package_flavor=schedmd" in output
        and "No package was installed." in output
    )


def test_the_schedmd_flavor_installs_slurm_smd_packages_and_checks_their_release(tmp_path: Path) -> None:
    code, output = release_check(
        tmp_path, "schedmd", {"slurmd": JAMMY_SLURMD, "slurm-smd-slurmd": smd_policy("(none)", "23.11.4-1")}
    )
    assert code == 0, output
    assert "packages=slurm-smd-slurmctld,slurm-smd-client,munge,slurm-smd-slurmd release=23.11" in output, (
        output
    )


def test_the_installed_version_wins_over_the_candidate(tmp_path: Path) -> None:
    code, output = release_check(
        tmp_path, "schedmd", {"slurm-smd-slurmd": smd_policy("23.11.4-1", "24.05.1-1")}, cgroup_fs="tmpfs"
    )
    assert code == 0, output
    assert "release=23.11" in output, output


def test_a_repository_without_the_package_is_refused(tmp_path: Path) -> None:
    code, output = release_check(tmp_path, "schedmd", {"slurmd": JAMMY_SLURMD})
    assert code != 0
    assert "unknown: localhost" in output and "no package slurm-smd-slurmctld there" in output, output


@pytest.mark.parametrize(("flavor", "repository"), [("schedmd", ""), ("smd", REPOSITORY)])
def test_a_flavor_without_repository_or_unknown_is_refused(
    tmp_path: Path, flavor: str, repository: str
) -> None:
    task = role_task("slurm", "preflight.yml", "Check the package flavor")
    proc = run_play(
        tmp_path, [task], {"slurm_package_flavor": flavor, "slurm_package_repository": repository}
    )
    assert proc.returncode != 0
    assert f"slurm_package_flavor is {flavor}" in proc.stdout and "set it to distribution" in proc.stdout, (
        proc.stdout
    )


def test_slurm_users_of_different_uids_are_refused_by_host(tmp_path: Path) -> None:
    check = role_task("slurm", "user-check.yml", "Check that the slurm user has one uid")
    entries = {
        "ctl": "slurm:x:64030:64030::/nonexistent:/usr/sbin/nologin",
        "node1": "",
        "node2": "slurm:x:999:999::/var/lib/slurm:/usr/sbin/nologin",
    }
    add_hosts = [
        {"name": f"Add {h}", "ansible.builtin.add_host": {"name": h, "__slurm_user_entry": {"stdout": e}}}
        for h, e in entries.items()
    ]
    proc = run_play(tmp_path, [*add_hosts, check], {"__slurm_cluster_hosts": list(entries)})
    assert proc.returncode != 0
    assert "different uids on the cluster's hosts (ctl: 64030, node2: 999)" in proc.stdout, proc.stdout
    same = {**entries, "node2": entries["ctl"]}
    add_same = [
        {"name": f"Add {h}", "ansible.builtin.add_host": {"name": h, "__slurm_user_entry": {"stdout": e}}}
        for h, e in same.items()
    ]
    assert run_play(tmp_path, [*add_same, check], {"__slurm_cluster_hosts": list(same)}).returncode == 0


@pytest.mark.parametrize(
    ("entries", "ids"),
    [
        ({"ctl": "", "node1": "slurm:x:64030:64030::/nonexistent:/usr/sbin/nologin"}, "64030,64030"),
        ({"ctl": "", "node1": ""}, "998,996"),  # none yet: the controller's new system user
    ],
)
def test_every_host_gets_the_uid_of_an_existing_slurm_user_else_the_controllers(
    tmp_path: Path, entries: dict[str, str], ids: str
) -> None:
    tasks = [
        *[
            {"name": f"Add {h}", "ansible.builtin.add_host": {"name": h, "__slurm_user_entry": {"stdout": e}}}
            for h, e in entries.items()
        ],
        role_task("slurm", "user.yml", "Note the hosts' existing slurm users"),
        role_task("slurm", "user.yml", "Note the slurm user's uid and gid"),
        {"name": "Show", "ansible.builtin.debug": {"msg": "ids={{ __slurm_user_ids | join(',') }}"}},
    ]
    controller = {"stdout": "slurm:x:998:996:Slurm workload manager:/var/lib/slurm:/usr/sbin/nologin"}
    proc = run_play(
        tmp_path, tasks, {"__slurm_cluster_hosts": list(entries), "__slurm_controller_user": controller}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"msg": "ids={ids}"' in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    ("flavor", "pid_file"),
    [("distribution", "/run/slurmctld.pid"), ("schedmd", "/run/slurmctld/slurmctld.pid")],
)
def test_slurmctlds_pid_file_is_where_its_unit_lets_it_write(
    tmp_path: Path, flavor: str, pid_file: str
) -> None:
    """SchedMD's slurmctld.service runs as User=slurm with RuntimeDirectory=slurmctld
    (etc/slurmctld.service.in at slurm-23-11-4-1); Debian's runs slurmctld as root."""
    target = tmp_path / "slurm.conf"
    task = {
        "name": "Write slurm.conf",
        "ansible.builtin.template": {
            "src": str(ROLES / "slurm" / "templates" / "slurm.conf.j2"),
            "dest": str(target),
        },
    }
    facts = {
        "hostname": "node1", "default_ipv4": {"address": "10.0.0.1"}, "processor_vcpus": 8,
        "processor_count": 1, "processor_cores": 8, "processor_threads_per_core": 1, "memtotal_mb": 64000,
    }  # fmt: skip
    extra = {
        **yaml.safe_load((ROLES / "slurm" / "defaults" / "main.yml").read_text()),
        **{f"__slurm_{name}_dir": f"/var/{name}" for name in ("state", "spool", "log")},
        "ansible_facts": facts,
        "__slurm_controller": "localhost",
        "slurm_nodes_group": "all",
        "slurm_package_flavor": flavor,
    }
    proc = run_play(tmp_path, [task], extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"\nSlurmctldPidFile={pid_file}\n" in target.read_text()


@pytest.mark.parametrize(("installed", "release"), [(False, "25.05"), (True, "23.11")])
def test_on_el_the_installed_rpm_wins_over_dnfs_newest(tmp_path: Path, installed: bool, release: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # rpm -q --quiet exits 1 for a package that is not installed; dnf repoquery prints the newest version.
    (bin_dir / "rpm").write_text(
        f'#!/bin/sh\n[ "$2" = --quiet ] && exit {0 if installed else 1}\necho 23.11.4\n'
    )
    (bin_dir / "dnf").write_text("#!/bin/sh\necho 25.05.2\n")
    for tool in ("rpm", "dnf"):
        (bin_dir / tool).chmod(0o755)
    tasks = [
        *tasks_of("release.yml", without="Check the Slurm release"),
        {"name": "Show", "ansible.builtin.debug": {"msg": "release={{ __slurm_distribution_release }}"}},
    ]
    extra = {"ansible_facts": {"os_family": "RedHat"}, "__slurm_packages": ["slurm", "slurm-slurmd", "munge"]}
    proc = run_play(tmp_path, tasks, extra, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"msg": "release={release}"' in proc.stdout, proc.stdout
