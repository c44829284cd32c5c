"""`gpuprov bootstrap`'s drift check end to end on the controller: the preflight, the probe, Ansible and SSH
are stand-ins (no host is reached); what is checked is the plan each run makes, what it hands Ansible, what
it records and what its summary says."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from gpuprov import host_preflight as preflight
from gpuprov import hosts
from gpuprov.ansible import recorded_versions, runs
from gpuprov.ansible.arguments import Options
from gpuprov.bootstrap import core, drift_probe, drift_records, role_map
from tests.unit.ansible import runner_stand_in
from tests.unit.bootstrap.test_drift import DRIVER_PKG, NCCL_CONF, report

VERIFIED = {"ansible_facts": {"gpuprov_verified": {"driver": "580.126.09", "nccl": "2.26.2"}}}


class Hosts:
    """What the stand-in hosts hold (their probe reports) and what each run asked of Ansible."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.state = {"node1": report(), "node2": report()}
        self.ansible: list[Mapping[str, Any]] = []
        self.monkeypatch = monkeypatch
        self.fail: set[str] = set()
        real_build = role_map.build
        # Every shipped role records a manifest once the manifest branches land: these tests do not wait.
        monkeypatch.setattr(
            role_map,
            "build",
            lambda *a: role_map.RoleMap(real_build(*a).tags_of, real_build(*a).cluster_wide, []),
        )
        monkeypatch.setattr(preflight, "run", self.preflight)
        monkeypatch.setattr(
            drift_probe, "run_alone", lambda host, extravars: json.loads(json.dumps(self.state[host.name]))
        )

    def preflight(self, inventory: hosts.Inventory, extravars: Mapping[str, Any], also: Any = None) -> Any:
        reports = []
        for host in inventory.hosts:
            extra = also(host, None) if also is not None else None
            reports.append(preflight.HostReport(host.name, "Ubuntu 24.04", (), extra=extra))
        return reports, []

    def bootstrap(self, options: Options, full: bool = False) -> dict[str, Any]:
        self.monkeypatch.setattr(
            drift_probe, "run", lambda client, host, extravars: json.loads(json.dumps(self.state[host.name]))
        )
        events = []
        for name in ("node1", "node2"):
            if name in self.fail:
                events.append(("runner_on_failed", {"host": name, "task": "t", "res": {"msg": "broke"}}))
            else:
                events.append(("runner_on_ok", {"host": name, "task": "t", "res": VERIFIED}))
        seen = runner_stand_in.install(self.monkeypatch, events, rc=2 if self.fail else 0)
        before = len(seen)
        try:
            return core.run(options, full=full)
        finally:
            self.ansible += seen[before:]


def test_first_run_is_full_then_a_rerun_runs_no_ansible_and_keeps_the_versions(
    options: Options, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Hosts(monkeypatch)
    first = cluster.bootstrap(options)
    assert first["drift"]["checked"]["node1"]["full_run"] == "no record of an earlier ok run"
    assert "tags" not in cluster.ansible[0] and "limit" not in cluster.ansible[0]
    assert drift_records.read(options.inventory, "node1") is not None
    capsys.readouterr()
    second = cluster.bootstrap(options)
    assert len(cluster.ansible) == 1  # no second Ansible run
    assert second["status"] == "ok" and second["drift"]["ansible_run"] is False
    assert {h["status"] for h in second["hosts"].values()} == {"ok"}
    assert {h["changed"] for h in second["hosts"].values()} == {0}
    err = capsys.readouterr().err
    assert "No drift on 2 host(s) (8 items checked): nothing to apply, changed=0" in err
    # lock diff and upgrade read the newest run's versions: still the verified ones
    assert second["versions"]["node1"] == {"driver": "580.126.09", "nccl": "2.26.2"}
    found = recorded_versions.latest(options.inventory, ["node1", "node2"])
    assert found["node2"].run_id == second["run_id"]


def test_drift_on_each_host_is_named_and_repaired_by_one_limited_run(
    options: Options, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Hosts(monkeypatch)
    cluster.bootstrap(options)
    cluster.state["node1"] = report(**{f"nccl:{NCCL_CONF}": "sha256:changed 644 0 0"})
    cluster.state["node2"] = report(
        **{f"nvidia_driver:{DRIVER_PKG}": "amd64 580.126.09-1 install ok installed"}
    )
    capsys.readouterr()
    summary = cluster.bootstrap(options)
    err = capsys.readouterr().err
    assert "node1: nccl: files /etc/nccl.conf changed" in err
    assert "node2: nvidia_driver: packages nvidia-driver-580 changed" in err
    run = cluster.ansible[-1]
    assert run["tags"] == "nccl,nvidia_driver" and "limit" not in run  # both hosts drifted: no limit needed
    assert summary["tags"] == ["nccl", "nvidia_driver"]
    # the next run finds them as recorded after the repair
    cluster.bootstrap(options)
    assert len(cluster.ansible) == 2


def test_one_drifted_host_limits_the_run_and_the_other_keeps_its_record(
    options: Options, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Hosts(monkeypatch)
    cluster.bootstrap(options)
    cluster.state["node2"] = report(**{f"nccl:{NCCL_CONF}": "absent"})
    summary = cluster.bootstrap(options)
    assert (cluster.ansible[-1]["limit"], cluster.ansible[-1]["tags"]) == ("node2", "nccl")
    assert summary["hosts"]["node1"]["status"] == "ok"  # not in the run, reported as the check found it
    assert summary["versions"]["node1"] == {"driver": "580.126.09", "nccl": "2.26.2"}


def test_full_runs_everything_and_a_failed_host_loses_its_record(
    options: Options, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Hosts(monkeypatch)
    cluster.bootstrap(options)
    summary = cluster.bootstrap(options, full=True)
    assert len(cluster.ansible) == 2 and "tags" not in cluster.ansible[-1] and "drift" not in summary
    cluster.fail = {"node2"}
    with pytest.raises(Exception, match="failed on 1 of 2"):
        cluster.bootstrap(options, full=True)
    assert drift_records.read(options.inventory, "node2") is None
    assert drift_records.read(options.inventory, "node1") is not None
    cluster.fail = set()
    summary = cluster.bootstrap(options)
    assert summary["drift"]["checked"]["node2"]["full_run"] == "no record of an earlier ok run"
    # node2 in full takes node1 too: the cluster-wide roles (network_tuning's firewall peers) read every host
    assert "limit" not in cluster.ansible[-1] and "tags" not in cluster.ansible[-1]


def test_tags_and_check_mode_skip_the_drift_check_and_record_nothing(
    options: Options, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Hosts(monkeypatch)
    for given in (
        Options(inventory=options.inventory, tags=("nccl",)),
        Options(inventory=options.inventory, check=True),
    ):
        summary = cluster.bootstrap(given)
        assert "drift" not in summary
    assert drift_records.read(options.inventory, "node1") is None
    assert not list(runs.runs_dir().glob("*/drift"))


def test_roles_without_manifests_turn_the_check_off_and_say_so(
    options: Options, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Hosts(monkeypatch)
    monkeypatch.setattr(role_map, "load", lambda *a: role_map.RoleMap({}, set(), ["nccl"]))
    cluster.bootstrap(options)
    cluster.bootstrap(options)
    assert len(cluster.ansible) == 2
    assert "Drift check off (roles that record no manifest: nccl): every role runs" in capsys.readouterr().err


def test_a_slurm_controller_outside_the_gpu_nodes_turns_the_check_off(
    options: Options, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """site.yml's Slurm play runs on it too, and the probe does not reach it: every role runs, every time."""
    cluster = Hosts(monkeypatch)
    text = options.inventory.read_text()
    options.inventory.write_text(text + "[slurm_controller]\nhead ansible_host=192.0.2.20\n")
    cluster.bootstrap(options)
    cluster.bootstrap(options)
    assert len(cluster.ansible) == 2 and "tags" not in cluster.ansible[-1]
    assert (
        "Drift check off (slurm_controller hosts outside the hosts probed: head)" in capsys.readouterr().err
    )
