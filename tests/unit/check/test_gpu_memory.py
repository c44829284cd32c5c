"""The gpu-memory check on recorded nvidia-smi outputs (tests/recorded/nvidia-smi/SOURCES.md, ECC)."""

from __future__ import annotations

from pathlib import Path

from gpuprov.check import gpu_memory, parsers
from gpuprov.check.results import Status
from tests.unit.check.test_host_checks import gathered, ran, view

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-smi"
H100_Q = (RECORDED / "query-full-1xH100SXM-565.57.01").read_text()
BUS = "00000000:18:00.0"  # that recording's GPU


def noheader(fields: list[str], name: str = "query-gpu-ecc-4xH100-535.161.07") -> str:
    """The recorded CSV's columns `fields`, as `--format=csv,noheader,nounits` prints them."""
    rows = parsers.smi_csv((RECORDED / name).read_text())
    return "".join(", ".join(row[f] for f in fields) + "\n" for row in rows)


def ecc_line(**counts: int) -> str:
    values = {f: "0" for f in parsers.ECC_FIELDS} | {"pci.bus_id": BUS}
    values.update({f"ecc.errors.{k.replace('_', '.')}": str(v) for k, v in counts.items()})
    return ", ".join(values[f] for f in parsers.ECC_FIELDS) + "\n"


def judged(smi_ecc: dict[str, object] | None, q: str = H100_Q) -> tuple[Status, str]:
    data = gathered(smi_q=ran(q), **({"smi_ecc": smi_ecc} if smi_ecc else {}))
    result = gpu_memory.gpu_memory(view(data, gpuprov_gpu_count=1))[0]
    return result.status, result.measured


def test_535_answers_every_ecc_field_gpuprov_asks_for() -> None:
    header = (RECORDED / "query-gpu-ecc-4xH100-535.161.07").read_text().splitlines()[0].split(", ")
    assert set(parsers.ECC_FIELDS) <= set(header)
    counts = parsers.ecc_query(noheader(list(parsers.ECC_FIELDS)))
    assert sorted(counts) == ["00000000:0A:00.0", "00000000:11:00.0", "00000000:18:00.0", "00000000:69:00.0"]
    assert all(value == 0 for gpu in counts.values() for value in gpu.values())


def test_na_counters_are_none_and_the_q_reading_stands() -> None:
    line = ", ".join([BUS] + ["[N/A]"] * (len(parsers.ECC_FIELDS) - 1)) + "\n"
    counts = parsers.ecc_query(line)[BUS]
    assert set(counts.values()) == {None}
    health = parsers.MemoryHealth(False, False, False, 2, 3, 1, 0, 0)
    assert parsers.with_ecc_query(health, counts) == health


def test_sram_uncorrectable_in_the_gpus_life_fails_as_azure_fails_it() -> None:
    status, measured = judged(ran(ecc_line(uncorrected_aggregate_sram=1)))
    assert status is Status.FAIL and "1 uncorrectable SRAM ECC (aggregate)" in measured


def test_aggregate_dram_only_warns_and_volatile_fails() -> None:
    assert judged(ran(ecc_line(uncorrected_aggregate_dram=2)))[0] is Status.WARN
    assert judged(ran(ecc_line(uncorrected_volatile_dram=1, uncorrected_aggregate_dram=1)))[0] is Status.FAIL


def test_sram_correctable_past_azures_limit_fails() -> None:
    assert judged(ran(ecc_line(corrected_aggregate_sram=10000)))[0] is Status.PASS
    assert judged(ran(ecc_line(corrected_aggregate_sram=10001)))[0] is Status.FAIL


def test_more_than_512_rows_remapped_for_uncorrectable_errors_fails() -> None:
    field = "        Uncorrectable Error               : 0\n"
    assert H100_Q.count(field) == 1
    for rows, status in ((512, Status.PASS), (513, Status.FAIL)):
        text = H100_Q.replace(field, field.replace(": 0", f": {rows}"))
        assert judged(ran(ecc_line()), text)[0] is status


def test_r510_sram_uncorrectable_label_is_read_when_the_query_did_not_answer() -> None:
    # The query failing (an old driver without the field) leaves the -q labels, R510's included.
    section = (RECORDED / "section-ecc-sram-uncorrectable-A100").read_text()
    gpu = parsers.smi_query(
        f"GPU {BUS}\n    Product Name                          : NVIDIA A100-SXM4-80GB\n{section}"
    )
    health = parsers.memory_health(gpu.gpus[0])
    assert (health.uncorrectable_volatile, health.sram_uncorrectable_aggregate) == (1, 5)


def test_a_query_that_fails_leaves_the_q_counters() -> None:
    # A driver without the field answers rc 2; the -q labels are read instead.
    failed = {
        "rc": 2,
        "stdout": 'Field "ecc.errors.uncorrected.volatile.sram" is not a valid field to query.',
    }
    line = "            SRAM Uncorrectable SEC-DED    : 0\n"
    head, volatile, aggregate = H100_Q.split(line)
    q = head + line + volatile + line.replace(": 0", ": 5") + aggregate
    assert judged(failed, q) == (Status.FAIL, f"GPU 0 ({BUS}): 5 uncorrectable SRAM ECC (aggregate)")


def test_recorded_r510_pending_remap_fails() -> None:
    gpu = parsers.smi_query((RECORDED / "query-ecc-A100SXM480GB-510.73.08").read_text()).gpus[0]
    health = parsers.memory_health(gpu)
    assert health.remap_pending and gpu_memory.findings(health) == (["row remap pending"], [])
