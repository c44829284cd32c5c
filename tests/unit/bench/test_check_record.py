"""bench records beside its result the busbw `gpuprov check` measured on the same hosts: the newest check
run, through check's own store, that covered exactly those hosts of that inventory and measured it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov.bench import check_record, report
from gpuprov.check import store
from gpuprov.check.results import Result, Status
from tests.unit.bench.test_report import CPU_RUNS


@pytest.fixture
def inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "inventory.ini"
    path.write_text("node1\nnode2\n")
    return path


def _bandwidth(host: str, status: Status, measured: str = "") -> dict[str, Any]:
    return Result("bandwidth", host, status, measured=measured, unit="GB/s busbw", detail="gloo").as_dict()


def _save(inventory: Path, hosts: list[str], results: list[dict[str, Any]], finished: str | None) -> str:
    summary: dict[str, Any] = {"inventory": str(inventory), "hosts": hosts, "results": results}
    if finished is not None:
        summary["started_at"] = "2026-11-25T20:00:00+00:00"
        summary["finished_at"] = finished
    return store.save(summary).name


def test_the_newest_check_that_measured_these_hosts_is_quoted(inventory: Path) -> None:
    slow, fast = (
        _bandwidth("all 2 hosts", Status.FAIL, "0.125 (spread 2%)"),
        _bandwidth("all 2 hosts", Status.PASS, "0.250 (spread 4%)"),
    )
    _save(inventory, ["node1", "node2"], [fast], "2026-11-25T20:00:05+00:00")
    newest = _save(inventory, ["node2", "node1"], [slow], "2026-11-25T20:10:05+00:00")
    _save(inventory, ["node1", "node2"], [], "2026-11-25T20:20:05+00:00")  # --quick: no bandwidth result
    _save(inventory, ["node1", "node2"], [_bandwidth("all 2 hosts", Status.COULD_NOT_RUN)], None)
    found = check_record.find(inventory, ["node1", "node2"])
    assert found == {
        "check_run": newest,
        "started_at": "2026-11-25T20:00:00+00:00",
        "finished_at": "2026-11-25T20:10:05+00:00",
        "hosts": ["node2", "node1"],
        "busbw_gbps": 0.125,
        "measured": "0.125 (spread 2%)",
        "status": "fail",
        "detail": "gloo",
    }
    assert check_record.line(found) == (
        "collective busbw (gpuprov check, finished 2026-11-25T20:10:05+00:00): 0.125 (spread 2%) GB/s, "
        "fail; gloo"
    )


def test_other_hosts_another_inventory_or_only_pairs_are_not_quoted(inventory: Path, tmp_path: Path) -> None:
    assert check_record.find(inventory, ["node1", "node2"]) is None  # no check ever ran
    other = tmp_path / "other.ini"
    other.write_text("node1\nnode2\n")
    _save(other, ["node1", "node2"], [_bandwidth("all 2 hosts", Status.PASS, "1.0 (spread 1%)")], "t")
    _save(inventory, ["node1", "node2", "node3"], [_bandwidth("all 3 hosts", Status.PASS, "1.0 (spread 1%)")],
          "t")  # fmt: skip
    _save(inventory, ["node1", "node2"], [_bandwidth("node1 <-> node2", Status.PASS, "1.0 (spread 1%)")], "t")
    assert check_record.find(inventory, ["node1", "node2"]) is None
    assert check_record.line(None).startswith("collective busbw: no `gpuprov check` bandwidth result")


def test_a_record_from_before_finished_at_names_its_run(inventory: Path) -> None:
    run = _save(inventory, ["node1"], [_bandwidth("all 1 hosts", Status.PASS, "2.5 (spread 0%)")], None)
    found = check_record.find(inventory, ["node1"])
    assert found is not None and found["finished_at"] is None
    assert f"finished run {run}" in check_record.line(found)


def test_the_document_carries_it(inventory: Path) -> None:
    _save(inventory, ["n1"], [_bandwidth("all 1 hosts", Status.PASS, "2.5 (spread 0%)")], "t")
    found = check_record.find(inventory, ["n1"])
    doc = report.document(CPU_RUNS, found)
    assert doc["collective_check"] == found and doc["collective_check"]["busbw_gbps"] == 2.5
