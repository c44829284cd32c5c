"""The recovery-action check and Xid 154, on recorded outputs (tests/recorded/nvidia-smi/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

from gpuprov.check import gpu_checks, parsers, recovery_action, xid
from gpuprov.check.results import Status
from tests.unit.check.test_host_checks import gathered, ran, view

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-smi"
RESET_LINE = (RECORDED / "section-recovery-action-reset-RTX4000Ada").read_text()


def judged(q: str) -> tuple[Status, str, str]:
    result = recovery_action.recovery_action(view(gathered(smi_q=ran(q)), gpuprov_gpu_count=1))[0]
    return result.status, result.measured, result.detail


def test_the_parser_reads_the_field_of_every_recorded_driver_that_prints_it() -> None:
    for name in (
        "query-full-1xH100SXM-565.57.01",
        "query-full-1xRTX5090-570.124.06",
        "query-full-1xH100-580.159.04",
    ):
        [gpu] = parsers.smi_query((RECORDED / name).read_text()).gpus
        assert gpu[recovery_action.FIELD] == "None", name


def test_none_passes() -> None:
    status, measured, _ = judged((RECORDED / "query-full-1xH100-580.159.04").read_text())
    assert (status, measured) == (Status.PASS, "None on 1 GPU(s)")


def test_a_reset_the_driver_asks_for_fails_naming_the_gpu_and_the_action() -> None:
    q = "Driver Version : 570.124.06\nGPU 00000000:CC:00.0\n" + RESET_LINE
    status, measured, _ = judged(q)
    assert (status, measured) == (Status.FAIL, "GPU 0 (00000000:CC:00.0): Reset")


def test_a_driver_without_the_field_is_not_applicable() -> None:
    status, _, detail = judged((RECORDED / "query-full-pending-remap-A100SXM4-555.42.02").read_text())
    assert status is Status.NOT_APPLICABLE and "555.42.02" in detail


# Kernel log lines as real hosts logged them, each right after an Xid 79: a 580.105.08 host and an RTX A4000
# host (public write-ups found with the search tool's exact-string index, which does not name their
# repositories, so they are quoted here rather than recorded under tests/recorded/dmesg-xid/).
# NVIDIA/open-gpu-kernel-modules#1134 reports the same "Node Reboot Required" on 595.71.05.
XID_154_REBOOT = (
    "NVRM: Xid (PCI:0000:01:00): 154, "
    "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
)
XID_154_RESET = (
    "NVRM: Xid (PCI:0000:5f:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
)


def xid_result(log: str) -> tuple[Status, str, str]:
    data = gathered(kernel_log={"rc": 0, "stdout": log})
    result = gpu_checks.xid_events(view(data, gpuprov_gpu_count=1))[0]
    return result.status, result.measured, result.detail


def test_xid_154_fails_with_the_action_the_driver_asks() -> None:
    status, measured, detail = xid_result(XID_154_REBOOT + "\n")
    assert (status, measured) == (Status.FAIL, "Xid 154")
    assert "Node Reboot Required" in detail
    assert "GPU Reset Required" in xid_result(XID_154_RESET + "\n")[2]


def test_xid_154_back_to_none_only_warns() -> None:
    line = XID_154_RESET.replace(
        "0x0 (None) to 0x1 (GPU Reset Required)", "0x1 (GPU Reset Required) to 0x0 (None)"
    )
    assert xid.needs_action(154, line.split("154, ", 1)[1]) is None
    assert xid_result(line + "\n")[0] is Status.WARN


def test_xid_140_and_143_fail() -> None:
    for code, words in ((140, "unrecovered ECC"), (143, "initialization failure")):
        status, _, detail = xid_result(f"NVRM: Xid (PCI:0000:18:00): {code}, pid=1, name=x\n")
        assert status is Status.FAIL and words in detail


def test_a_gpu_that_cannot_say_is_named_in_the_measure_not_failed() -> None:
    h100 = (RECORDED / "query-full-1xH100-580.159.04").read_text()
    label = "    GPU Recovery Action                                : "
    second = h100[h100.index("GPU 00000000") :].replace("00000000:00:06.0", "00000000:00:07.0")
    status, measured, _ = judged(h100 + "\n" + second.replace(label + "None", label + "N/A"))
    assert (status, measured) == (Status.PASS, "None on 1 GPU(s), N/A on 1")
