"""`gpuprov upgrade` and `gpuprov lock diff`: bad input is one line and exit 2 before any host is contacted
(the conftest's hosts refuse every connection: a command that reached one would exit 6), --dry-run and
lock diff read only files, and a second upgrade of the same inventory is refused (exit 4)."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest
import yaml

from gpuprov.upgrade import state
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error
from tests.unit.upgrade.locks import LOCK_A, LOCK_B, VERIFIED_A, VERIFIED_B


@pytest.fixture
def cluster(work: Path) -> Path:
    """work's two hosts, with lock files A and B and a bootstrap run that verified lock A on both."""
    (work / "a.yml").write_text(yaml.safe_dump({"gpu_stack": LOCK_A}))
    (work / "b.yml").write_text(yaml.safe_dump({"gpu_stack": LOCK_B}))
    run = work / "state" / "runs" / "20261126-100000-000001"
    run.mkdir(parents=True)
    summary = {
        "verb": "bootstrap",
        "status": "ok",
        "inventory_path": str((work / "inventory.ini").resolve()),
        "versions": {"node1": VERIFIED_A, "node2": VERIFIED_A},
    }
    (run / "summary.json").write_text(json.dumps(summary))
    return work


def gpuprov(work: Path, *args: str) -> in_process.Result:
    return in_process.gpuprov(
        *args, cwd=work, env={"GPUPROV_STATE_DIR": str(work / "state"), "COLUMNS": "250"}
    )


def test_dry_run_shows_the_plan_from_the_verified_versions_and_touches_nothing(cluster: Path) -> None:
    done = gpuprov(cluster, "upgrade", "b.yml", "inventory.ini", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout.splitlines()[0])
    assert plan["batches"] == [["node1"], ["node2"]] and plan["canary"]
    assert [p["component"] for p in plan["hosts"]["node1"]["parts"]] == ["driver", "cuda", "nccl"]
    assert not (cluster / "state" / "upgrades").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["missing.yml"], "lock file missing.yml does not exist"),
        (["b.yml", "--max-unavailable", "0"], "--max-unavailable"),
        (["b.yml", "--drain-timeout", "soon"], "--drain-timeout"),
        (["b.yml", "--resume"], "--resume: no rollout of this inventory to continue"),
        (["a.yml"], "driver would go from"),  # the hosts verified lock B (below): a downgrade
    ],
)
def test_bad_input_is_one_line_before_any_host(cluster: Path, args: list[str], expected: str) -> None:
    if args == ["a.yml"]:  # a downgrade: the hosts verified lock B, NEW_LOCK is A
        summary = next((cluster / "state" / "runs").iterdir()) / "summary.json"
        data = json.loads(summary.read_text())
        data["versions"] = {"node1": VERIFIED_B, "node2": VERIFIED_B}
        summary.write_text(json.dumps(data))
    line = one_error(gpuprov(cluster, "upgrade", *args, "inventory.ini"), 2)
    assert expected in line


def test_a_new_lock_that_does_not_fit_is_refused_before_anything_is_drained(cluster: Path) -> None:
    (cluster / "bad.yml").write_text(
        yaml.safe_dump({"gpu_stack": {**LOCK_B, "driver_version": "535.216.03"}})
    )
    line = one_error(gpuprov(cluster, "upgrade", "bad.yml", "inventory.ini"), 2)
    assert "NEW_LOCK bad.yml does not fit" in line and "nothing was drained" in line


def test_a_second_upgrade_of_the_same_inventory_is_refused(
    cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(cluster / "state"))
    directory = state.rollout_dir(cluster / "inventory.ini")
    directory.mkdir(parents=True)
    with open(directory / "lock", "a+", encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242\n")
        held.flush()
        line = one_error(gpuprov(cluster, "upgrade", "b.yml", "inventory.ini"), 4)
    assert "another gpuprov upgrade of" in line and "pid 4242" in line


def test_an_unfinished_rollout_must_be_resumed(cluster: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(cluster / "state"))
    state.create(
        cluster / "inventory.ini", {"id": "r9", "status": "stopped", "lock": LOCK_B, "hosts": {}}, LOCK_B
    )
    line = one_error(gpuprov(cluster, "upgrade", "b.yml", "inventory.ini"), 2)
    assert "rollout r9 of this inventory is not finished" in line and "--resume" in line
    other = one_error(gpuprov(cluster, "upgrade", "a.yml", "inventory.ini", "--resume"), 2)
    assert "is not the lock of rollout r9" in other


def test_lock_diff_per_field_and_per_host_from_the_records(cluster: Path) -> None:
    done = gpuprov(cluster, "lock", "diff", "a.yml", "b.yml", "inventory.ini", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert [f["field"] for f in found["fields"]] == [
        "driver_branch",
        "driver_version",
        "cuda_version",
        "nccl_version",
    ]
    node1 = found["hosts"]["node1"]
    assert node1["reboot"] and node1["roles"] == ["nvidia_driver", "cuda", "cudnn", "nccl"]
    assert node1["record"] == "run 20261126-100000-000001"
    table = gpuprov(cluster, "lock", "diff", "a.yml", "b.yml", "inventory.ini")
    assert table.returncode == 0 and "driver 550.127.08 -> 570.124.06" in table.stderr  # tables: stderr


def test_lock_diff_without_an_inventory_shows_the_fields(cluster: Path) -> None:
    done = gpuprov(cluster / "state", "lock", "diff", "../a.yml", "../b.yml")
    assert done.returncode == 0, done.stderr
    assert "driver_version" in done.stderr and "give INVENTORY" in done.stderr


def test_dry_run_names_the_roles_each_batch_applies(cluster: Path) -> None:
    """Only the roles the lock change touches (a new CUDA runs cuDNN's and NCCL's roles again), or with
    --all-roles the whole site.yml."""
    done = gpuprov(cluster, "upgrade", "b.yml", "inventory.ini", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "canary applies: preflight, nvidia_driver, cuda, cudnn, nccl" in done.stderr
    assert "batch 2 applies: preflight, nvidia_driver, cuda, cudnn, nccl" in done.stderr
    every = gpuprov(cluster, "upgrade", "b.yml", "inventory.ini", "--dry-run", "--all-roles")
    assert every.returncode == 0 and "--all-roles: each batch applies all of site.yml" in every.stderr
