"""The mpi role's static promises: the private key only in no_log tasks, its ports clear of the others'
ranges, and a recorded Open MPI release for every OS release it supports."""

import re

import pytest
import yaml

from gpuprov import resources

ROLE = resources.data_dir("roles") / "mpi"
ROLES = resources.data_dir("roles")


def _tasks() -> list[tuple[str, dict[str, object]]]:
    found = []
    for path in sorted((ROLE / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            found.append((f"{path.name}: {task.get('name')}", task))
    return found


def _range(text: str) -> tuple[int, int]:
    first, last = text.split("-")
    return int(first), int(last)


def test_every_task_that_touches_the_private_key_is_no_log():
    # The private half is the slurped key file (results[0]); only the tasks that read or write it see it.
    touching = [
        (name, task)
        for name, task in _tasks()
        if "ansible.builtin.slurp" in task or "results[0].content" in yaml.safe_dump(task)
    ]
    assert len(touching) == 2, [name for name, _ in touching]
    assert [name for name, task in touching if task.get("no_log") is not True] == []


def test_the_public_key_tasks_show_no_private_content():
    for name, task in _tasks():
        text = yaml.safe_dump(task)
        if "results[1].content" in text:
            assert "results[0]" not in text, name


def test_ports_lie_outside_the_ephemeral_rendezvous_and_srun_ranges():
    mine = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    tuning = yaml.safe_load((ROLES / "network_tuning" / "defaults" / "main.yml").read_text())
    slurm = yaml.safe_load((ROLES / "slurm" / "defaults" / "main.yml").read_text())
    btl = (mine["mpi_btl_tcp_port_min"], mine["mpi_btl_tcp_port_min"] + mine["mpi_btl_tcp_port_range"] - 1)
    oob = _range(mine["mpi_oob_tcp_ports"])
    others = [
        _range(tuning["network_tuning_ephemeral_ports"]),
        _range(tuning["network_tuning_rendezvous_ports"]),
        _range(slurm["slurm_srun_port_range"]),
    ]
    for first, last in (btl, oob):
        assert all(last < lo or hi < first for lo, hi in others), (first, last, others)
    assert btl[1] < oob[0] or oob[1] < btl[0]


PLATFORM_VARS = ["Debian-12", "Ubuntu-20", "Ubuntu-22", "Ubuntu-24", "RedHat-8", "RedHat-9"]


@pytest.mark.parametrize("name", PLATFORM_VARS)
def test_every_supported_release_records_its_open_mpi(name: str):
    path = ROLE / "vars" / f"{name}.yml"
    text = path.read_text()
    assert re.search(r"https?://|apt-cache|openmpi\.spec|[Ss]ource:", text), f"{name}: no source recorded"
    releases = yaml.safe_load(text)["__mpi_releases"]
    assert len(releases) == 1  # an OS release ships one Open MPI
    for series, packages in releases.items():
        assert re.fullmatch(r"\d+\.\d+", series)
        for package, version in packages.items():
            # The exact version starts with the series (after an epoch).
            assert re.sub(r"^\d+:", "", version).startswith(series + "."), (package, version)


def test_the_sandbox_lock_series_is_debian_12s():
    lock = yaml.safe_load((resources.data_dir("playbooks") / "vars" / "sandbox_lock.yml").read_text())
    debian = yaml.safe_load((ROLE / "vars" / "Debian-12.yml").read_text())["__mpi_releases"]
    assert lock["gpu_stack"]["openmpi_version"] in debian


def test_site_runs_the_role_only_when_switched_on_after_the_firewall_and_before_horovod():
    plays = yaml.safe_load((resources.data_dir("playbooks") / "site.yml").read_text())
    play = next(p for p in plays if p.get("name") == "Install the NVIDIA stack")
    names = [r["role"] for r in play["roles"]]
    [entry] = [r for r in play["roles"] if r["role"] == "mpi"]
    assert entry["when"] == "mpi_enabled | default(false) | bool"
    # network_tuning turns ufw on (the role only opens ports where it is on); python_env's Horovod build
    # needs the role's mpicxx.
    assert names.index("network_tuning") < names.index("mpi") < names.index("python_env")
