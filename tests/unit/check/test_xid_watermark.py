"""Xids judged once: the per-host watermark (boot id, newest Xid's seconds since boot) that a check leaves
for the next (issue 30 item 6), on recorded kernel logs (tests/recorded/dmesg-xid/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.check import gpu_checks, parsers, xid_watermark
from gpuprov.check.results import Result, Status
from tests.unit.check.test_host_checks import gathered, view

RECORDED = Path(__file__).parents[2] / "recorded" / "dmesg-xid"
BUMBLEBEE = (RECORDED / "dmesg-bumblebee").read_text()  # plain dmesg: Xid 32, 32, 31 at 24128.83 s
BOOT = "6f1a3c2e-0000-4000-8000-000000000001"
XID_79 = "[24200.101010] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n"  # the journal-k-xid79
# line, as plain dmesg prints it


def check(log: str, mark: xid_watermark.Watermark | None, boot_id: str = BOOT) -> Result:
    data = xid_watermark.with_mark(gathered(kernel_log={"rc": 0, "stdout": log}, boot_id=boot_id), mark)
    return gpu_checks.xid_events(view(data, gpuprov_gpu_count=1))[0]


def test_plain_dmesg_lines_carry_their_seconds_since_boot() -> None:
    assert [e.seconds for e in parsers.xid_events(BUMBLEBEE)] == [24128.828315, 24128.828608, 24128.834365]
    journal = parsers.xid_events((RECORDED / "journal-k-xid79").read_text())  # syslog prefix: no seconds
    assert [e.seconds for e in journal] == [None]


def test_after_a_check_the_same_xids_are_not_judged_again() -> None:
    first = check(BUMBLEBEE + XID_79, None)
    assert first.status is Status.FAIL
    mark = xid_watermark.advanced(
        {},
        [("node1", gathered(kernel_log={"rc": 0, "stdout": BUMBLEBEE + XID_79}, boot_id=BOOT))],
        "2026-11-26T19:00:00+00:00",
    )["node1"]
    assert (mark.boot_id, mark.seconds) == (BOOT, 24200.10101)
    again = check(BUMBLEBEE + XID_79, mark)  # after the prescribed nvidia-smi -r, before any reboot
    assert again.status is Status.PASS
    assert again.measured == "none since the check of 2026-11-26T19:00:00+00:00"
    assert "Xid 31, 32, 79 judged by the check of 2026-11-26T19:00:00+00:00" in again.detail


def test_an_xid_after_the_watermark_is_judged() -> None:
    mark = xid_watermark.Watermark(BOOT, 24128.834365, "2026-11-26T19:00:00+00:00")
    result = check(BUMBLEBEE + XID_79, mark)
    assert (result.status, result.measured) == (Status.FAIL, "Xid 79")
    assert "judged by the check of" in result.detail  # the older ones are named, not judged


def test_a_reboot_starts_over() -> None:
    mark = xid_watermark.Watermark("another-boot", 99999.0, "2026-11-26T19:00:00+00:00")
    assert check(BUMBLEBEE, mark).status is Status.WARN  # Xid 31, 32: judged again, not in the fail list


def test_the_watermark_never_moves_back_and_skips_unread_logs() -> None:
    old = xid_watermark.Watermark(BOOT, 30000.0, "earlier")
    unread = ("node2", {"kernel_log": {"rc": None}, "boot_id": BOOT})
    read = ("node1", {"kernel_log": {"rc": 0, "stdout": BUMBLEBEE}, "boot_id": BOOT})
    marks = xid_watermark.advanced({"node1": old, "node2": old}, [read, unread], "now")
    assert marks["node1"] == xid_watermark.Watermark(BOOT, 30000.0, "now")
    assert marks["node2"] == old


def test_saved_and_loaded_from_the_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path))
    assert xid_watermark.load() == {}
    marks = {"node1": xid_watermark.Watermark(BOOT, 1.5, "now")}
    xid_watermark.save(marks)
    assert xid_watermark.load() == marks
    (tmp_path / "checks" / xid_watermark.FILE).write_text("not json")
    assert xid_watermark.load() == {}  # unreadable: every Xid is new again, never a crash
