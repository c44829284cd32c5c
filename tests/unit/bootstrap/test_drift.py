"""The drift check's parts: comparing a host with its record, the plan for the run, the records, the input
fingerprint and the map from roles to site.yml tags."""

from __future__ import annotations

import dataclasses
import functools
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts, resources
from gpuprov.ansible import arguments
from gpuprov.bootstrap import drift, drift_records, fingerprint, role_map
from gpuprov.bootstrap.drift_records import Record
from gpuprov.bootstrap.role_map import RoleMap

IDENTITY = {
    "kernel": "6.8.0-49-generic",
    "os_release": "ab" * 32,
    "machine_id": "0" * 32,
    "nvidia_driver": "580.126.09",
    "nvidia_devices": [f"/dev/nvidia{i}" for i in range(8)],
}
NCCL_CONF = "files /etc/nccl.conf"
SITE = arguments.playbook_path("site.yml")
DRIVER_PKG = "packages nvidia-driver-580"


def report(**changes: Any) -> dict[str, Any]:
    roles = {
        "nccl": {
            "items": {NCCL_CONF: "sha256:aa 644 0 0", "packages libnccl2": "amd64 2.26.2-1+cuda12.8 hold"}
        },
        "nvidia_driver": {"items": {DRIVER_PKG: "amd64 580.126.09-1 hold ok installed"}},
        "nvidia_repository": {"items": {"files /etc/apt/sources.list.d/cuda.sources": "sha256:bb 644 0 0"}},
    }
    found = {"identity": dict(IDENTITY), "roles": roles, "package_manager": "dpkg"}
    for path, value in changes.items():
        role, item = path.split(":", 1)
        if value is None:
            del roles[role]
        else:
            roles[role]["items"][item] = value
    return found


def record(fp: str = "fp1", source: dict[str, Any] | None = None) -> Record:
    found = drift.record_of(source or report(), fp, "run1")
    assert found is not None
    return found


@functools.cache
def roles_map() -> role_map.RoleMap:
    return role_map.build(arguments.playbook_path("site.yml"), resources.data_dir("roles"))


def test_a_host_as_recorded_has_no_drift() -> None:
    check = drift.compare("node1", "fp1", record(), report())
    assert (check.full, check.drifted, check.items) == ("", {}, 4)


@pytest.mark.parametrize(
    ("fp", "rec", "probe", "reason"),
    [
        ("fp1", None, report(), "no record of an earlier ok run"),
        ("fp2", record(), report(), "the inputs changed"),
        (None, record(), report(), "reads through a lookup"),
        (
            "fp1",
            record(),
            "the probe failed (exit 1): sudo: a password is required",
            "a password is required",
        ),
        ("fp1", record(), None, "no probe report"),
    ],
)
def test_any_doubt_is_a_full_run_with_its_reason(
    fp: str | None, rec: Record | None, probe: Any, reason: str
) -> None:
    check = drift.compare("node1", fp, rec, probe)
    assert reason in check.full and not check.drifted


def test_a_manifest_the_probe_could_not_read_is_a_full_run() -> None:
    broken = report()
    broken["roles"]["nccl"] = {
        "error": "/var/lib/gpuprov/managed/nccl.json has keys this probe does not know: x"
    }
    check = drift.compare("node1", "fp1", record(), broken)
    assert check.full == f"the probe could not read a manifest: nccl: {broken['roles']['nccl']['error']}"


@pytest.mark.parametrize("key", ["kernel", "machine_id", "nvidia_driver", "nvidia_devices"])
def test_another_identity_is_a_full_run(key: str) -> None:
    moved = report()
    moved["identity"][key] = "other"
    assert (
        drift.compare("node1", "fp1", record(), moved).full
        == f"the host is not the one recorded: {key} changed"
    )


def test_changed_absent_new_and_vanished_items_and_manifests_are_drift() -> None:
    now = report(**{f"nccl:{NCCL_CONF}": "sha256:cc 644 0 0", f"nvidia_driver:{DRIVER_PKG}": "absent"})
    now["roles"]["nccl"]["items"]["files /etc/nccl.conf.d/x"] = "sha256:dd 644 0 0"
    now["roles"]["cuda"] = {"items": {}}
    del now["roles"]["nvidia_repository"]
    check = drift.compare("node1", "fp1", record(), now)
    assert check.full == ""
    assert check.drifted == {
        "cuda": ["its manifest appeared"],
        "nccl": [f"{NCCL_CONF} changed", "files /etc/nccl.conf.d/x is new"],
        "nvidia_driver": [f"{DRIVER_PKG} is absent"],
        "nvidia_repository": ["its manifest vanished"],
    }
    plan = drift.make_plan([check], roles_map(), ["node1"])
    assert "node1: nccl: files /etc/nccl.conf changed" in drift.lines(plan)


def test_no_drift_anywhere_plans_no_ansible_run() -> None:
    checks = [drift.compare(name, "fp1", record(), report()) for name in ("node1", "node2")]
    plan = drift.make_plan(checks, roles_map(), ["node1", "node2"])
    assert not plan.runs_ansible and plan.as_dict()["checked"]["node2"]["items_checked"] == 4


def test_the_run_is_limited_to_the_drifted_hosts_and_their_roles_tags() -> None:
    checks = [
        drift.compare("node1", "fp1", record(), report(**{f"nccl:{NCCL_CONF}": "sha256:ee 644 0 0"})),
        drift.compare(
            "node2", "fp1", record(), report(**{f"nvidia_driver:{DRIVER_PKG}": "amd64 580 install"})
        ),
        drift.compare("node3", "fp1", record(), report()),
    ]
    plan = drift.make_plan(checks, roles_map(), ["node1", "node2", "node3"])
    assert (plan.hosts, plan.tags) == (["node1", "node2"], ["nccl", "nvidia_driver"])


def test_a_dependency_role_drifting_reapplies_every_tagged_role_that_uses_it() -> None:
    now = report(**{"nvidia_repository:files /etc/apt/sources.list.d/cuda.sources": "absent"})
    plan = drift.make_plan([drift.compare("node1", "fp1", record(), now)], roles_map(), ["node1"])
    assert {"nvidia_driver", "cuda", "cudnn", "nccl"} <= set(plan.tags)


def test_a_full_run_anywhere_drops_the_tags_and_a_cluster_wide_role_takes_every_host() -> None:
    full = [drift.compare("node1", "fp1", None, report()), drift.compare("node2", "fp1", record(), report())]
    plan = drift.make_plan(full, roles_map(), ["node1", "node2"])
    # network_tuning (the firewall's peers), slurm and mpi read the whole play, and slurm's and mpi's
    # preflights refuse a part of the cluster: one host in full takes every host in full.
    assert (plan.hosts, plan.tags) == (["node1", "node2"], [])
    no_cluster_roles = RoleMap(roles_map().tags_of, set(), roles_map().unrecorded)
    assert drift.make_plan(full, no_cluster_roles, ["node1", "node2"]).hosts == ["node1"]
    firewall = report()
    firewall["roles"]["network_tuning"] = {"items": {"firewall": "sha256:11"}}
    before = record(source=firewall)
    firewall["roles"]["network_tuning"]["items"]["firewall"] = "sha256:22"
    checks = [
        drift.compare("node1", "fp1", before, firewall),
        drift.compare("node2", "fp1", record(), report()),
    ]
    plan = drift.make_plan(checks, roles_map(), ["node1", "node2"])
    assert (plan.hosts, plan.tags) == (["node1", "node2"], ["network_tuning"])  # its peer list spans hosts


def test_a_drifted_role_no_tag_reapplies_is_a_full_run() -> None:
    odd = report()
    odd["roles"]["somebody_elses"] = {"items": {"files /etc/x": "absent"}}
    plan = drift.make_plan([drift.compare("node1", "fp1", record(), odd)], roles_map(), ["node1"])
    assert plan.tags == [] and "no site.yml tag re-applies it" in plan.checks[0].full


def test_the_shipped_roles_map_to_their_tags() -> None:
    found = roles_map()
    assert found.tags_of["nccl"] == {"nccl"}
    assert found.tags_of["slurm_pyxis"] == {"slurm"}  # included by the slurm role, not tagged itself
    assert {"nvidia_driver", "cuda", "cudnn", "nccl"} <= found.tags_of["nvidia_repository"]
    assert {"slurm", "mpi", "network_tuning"} <= found.cluster_wide and "nccl" not in found.cluster_wide


def test_records_round_trip_privately_and_a_damaged_one_is_none(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("node1\n")
    assert drift_records.write(inventory, "node1", record(), root=tmp_path) is None
    assert drift_records.read(inventory, "node1", root=tmp_path) == record()
    (file,) = drift_records.folder(inventory, tmp_path).iterdir()
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert "sha256:aa" in file.read_text() and "NCCL_IB" not in file.read_text()
    file.write_text('{"format": 1, "roles": {"nccl": {"x": 1}}}')
    assert drift_records.read(inventory, "node1", root=tmp_path) is None
    drift_records.forget(inventory, "node1", root=tmp_path)
    assert drift_records.read(inventory, "node1", root=tmp_path) is None


def test_records_that_cannot_be_written_say_why(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the folder should be")
    problem = drift_records.write(tmp_path / "inventory.ini", "node1", record(), root=blocker)
    assert problem is not None and str(blocker) in problem


def test_the_fingerprint_follows_the_inventory_vars_and_extra_vars(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\n")
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "lock.yml").write_text("nccl_version: 2.26.2\n")
    host = hosts.Host("node1", "192.0.2.10", 22, "ubuntu", None, Path(os.devnull), vars={"a": 1})
    base = fingerprint.for_host(fingerprint.shared(inventory, {}, SITE), host, {})
    assert base == fingerprint.for_host(fingerprint.shared(inventory, {}, SITE), host, {})
    elsewhere = dataclasses.replace(host, vars={"a": 1, "ansible_playbook_python": "/opt/venv/bin/python"})
    assert base == fingerprint.for_host(fingerprint.shared(inventory, {}, SITE), elsewhere, {})
    assert base != fingerprint.for_host(fingerprint.shared(inventory, {"x": 1}, SITE), host, {"x": 1})
    other = dataclasses.replace(host, vars={"a": 2})
    assert base != fingerprint.for_host(fingerprint.shared(inventory, {}, SITE), other, {})
    (tmp_path / "group_vars" / "all" / "lock.yml").write_text("nccl_version: 2.27.3\n")
    assert base != fingerprint.for_host(fingerprint.shared(inventory, {}, SITE), host, {})
    other_playbook = tmp_path / "small.yml"
    other_playbook.write_text("- hosts: all\n")
    assert base != fingerprint.for_host(fingerprint.shared(inventory, {}, other_playbook), host, {})
    lookup = dataclasses.replace(host, vars={"key": "{{ lookup('file', '/etc/key') }}"})
    assert fingerprint.for_host(fingerprint.shared(inventory, {}, SITE), lookup, {}) is None


def test_the_kept_role_map_is_per_playbook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A playbook without site.yml's tags (a test's own) must not leave its empty map for site.yml's runs:
    CI's first try of the drift check ran every role in full after one such run had filled the cache."""
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    other = tmp_path / "play.yml"
    other.write_text("- hosts: all\n  tasks:\n    - ansible.builtin.ping:\n")
    roles, code = resources.data_dir("roles"), fingerprint.code()
    assert role_map.load(other, roles, code).tags_of["nccl"] == set()
    assert role_map.load(SITE, roles, code).tags_of["nccl"] == {"nccl"}
    assert role_map.load(SITE, roles, code).tags_of["nccl"] == {"nccl"}  # read back from the state dir
    assert len(list((tmp_path / "state" / "drift").glob("roles-*.json"))) == 2
