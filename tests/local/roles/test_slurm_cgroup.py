"""The slurm role's cgroup.conf for each packaged release uses only the keys that release documents
(tests/recorded/slurm/cgroup-conf-keys.txt: cgroup.conf(5) at each tag; 19.05 and 20.11 fatal() on an
unknown key: xcgroup_read_config.c, s_p_parse_file(..., false)), the refusal of nodes booted with cgroup v2
for releases before 22.05, and Ubuntu 20.04's /etc/slurm-llnl paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.local.roles.local_play import ROLES, role_task, run_play

pytestmark = pytest.mark.local

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "slurm" / "cgroup-conf-keys.txt"
PACKAGED = [
    "19.05",
    "20.11",
    "21.08",
    "22.05",
    "23.11",
]  # Ubuntu 20.04, EL 8, Ubuntu 22.04, Debian 12/EL 9, Ubuntu 24.04


def documented() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Each release's documented keys, and CgroupPlugin's documented values."""
    keys: dict[str, set[str]] = {}
    values: dict[str, set[str]] = {}
    for line in RECORDED.read_text().splitlines():
        if match := re.match(r"^(\d+\.\d+) \S+ \S+: (.*)$", line):
            keys[match[1]] = set(match[2].split())
        elif match := re.match(r"^CgroupPlugin (\d+\.\d+): (.*)$", line):
            values[match[1]] = set(match[2].split("|"))
    return keys, values


def rendered(tmp_path: Path, release: str) -> dict[str, str]:
    target = tmp_path / f"cgroup-{release}.conf"
    task = {
        "name": "Write cgroup.conf",
        "ansible.builtin.template": {
            "src": str(ROLES / "slurm" / "templates" / "cgroup.conf.j2"),
            "dest": str(target),
        },
    }
    proc = run_play(tmp_path, [task], {"__slurm_config_release": release})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in target.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.parametrize("release", PACKAGED)
def test_cgroup_conf_has_only_documented_keys_and_values(tmp_path: Path, release: str) -> None:
    keys, values = documented()
    conf = rendered(tmp_path, release)
    assert set(conf) <= keys[release], set(conf) - keys[release]
    assert {"ConstrainCores", "ConstrainRAMSpace", "ConstrainDevices"} <= set(conf)
    if "CgroupPlugin" in conf:
        assert conf["CgroupPlugin"] in values[release]


@pytest.mark.parametrize(
    ("release", "plugin"),
    [
        ("19.05", None),
        ("20.11", None),
        ("21.08", "cgroup/v1"),
        ("22.05", "autodetect"),
        ("23.11", "autodetect"),
    ],
)
def test_the_cgroup_plugin_each_release_gets(tmp_path: Path, release: str, plugin: str | None) -> None:
    assert rendered(tmp_path, release).get("CgroupPlugin") == plugin


def refusal(
    tmp_path: Path, nodes: dict[str, tuple[str, str]], container_safe: bool = False
) -> tuple[int, str]:
    """The cgroup check for nodes (name: (Slurm release, /sys/fs/cgroup's type))."""
    task = role_task("slurm", "release-checks.yml", "Check that the nodes' Slurm release can use")
    add_hosts = [
        {
            "name": f"Add {host}",
            "ansible.builtin.add_host": {
                "name": host,
                "groups": "gpu_nodes",
                "__slurm_distribution_release": release,
                "__slurm_cgroup_fs": {"stdout": fs},
            },
        }
        for host, (release, fs) in nodes.items()
    ]
    extra = {
        "slurm_nodes_group": "gpu_nodes",
        "slurm_package_repository": "",
        "slurm_container_safe": container_safe,
    }
    proc = run_play(tmp_path, [*add_hosts, task], extra)
    return proc.returncode, proc.stdout + proc.stderr


def test_jammy_nodes_booted_with_cgroup_v2_are_refused_by_name(tmp_path: Path) -> None:
    code, output = refusal(
        tmp_path,
        {"jammy1": ("21.08", "cgroup2fs"), "jammy2": ("21.08", "tmpfs"), "jammy3": ("21.08", "cgroup2fs")},
    )
    assert code != 0
    assert "jammy1, jammy3 booted with the cgroup v2 hierarchy" in output, output
    assert "systemd.unified_cgroup_hierarchy=0" in output and "Nothing was changed." in output


@pytest.mark.parametrize(
    "nodes",
    [
        {"jammy1": ("21.08", "tmpfs")},  # booted with cgroup v1
        {"bookworm1": ("22.05", "cgroup2fs"), "noble1": ("23.11", "cgroup2fs")},  # cgroup/v2 since 22.05
    ],
)
def test_releases_that_can_use_the_hierarchy_pass(tmp_path: Path, nodes: dict[str, tuple[str, str]]) -> None:
    code, output = refusal(tmp_path, nodes)
    assert code == 0, output


def test_container_safe_settings_confine_nothing_and_pass(tmp_path: Path) -> None:
    code, output = refusal(tmp_path, {"jammy1": ("21.08", "cgroup2fs")}, container_safe=True)
    assert code == 0, output


@pytest.mark.parametrize(
    ("distribution", "major", "conf_dir", "state_dir"),
    [
        ("Ubuntu", "20", "/etc/slurm-llnl", "/var/lib/slurm-llnl/slurmctld"),
        ("Ubuntu", "22", "/etc/slurm", "/var/lib/slurm/slurmctld"),
        ("Debian", "12", "/etc/slurm", "/var/lib/slurm/slurmctld"),
    ],
)
def test_configuration_paths_of_each_release(
    tmp_path: Path, distribution: str, major: str, conf_dir: str, state_dir: str
) -> None:
    tasks = [
        {
            "name": "Load the family's settings",
            "ansible.builtin.include_vars": str(ROLES / "slurm" / "vars" / "Debian.yml"),
        },
        role_task("slurm", "preflight.yml", "Load the Slurm release"),
        {
            "name": "Show",
            "ansible.builtin.debug": {"msg": "dirs={{ __slurm_conf_dir }} {{ __slurm_state_dir }}"},
        },
    ]
    facts = {"distribution": distribution, "os_family": "Debian", "distribution_major_version": major}
    proc = run_play(tmp_path, tasks, {"ansible_facts": facts, "role_path": str(ROLES / "slurm")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"msg": "dirs={conf_dir} {state_dir}"' in proc.stdout, proc.stdout
