"""GPU generations against the lock (gpuprov.gpu_generations), on the shipped tables: the device ids of
pci.ids (playbooks/vars/gpu_devices.yml) and the generation rules with their sources
(playbooks/vars/gpu_generations.yml)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpuprov import gpu_generations, lock
from gpuprov.gpu_generations import PciGpu
from tests.locks import CUDA13

TABLES = gpu_generations.load_tables()
CUDA_VERSIONS = [str(r["version"]) for r in lock.load_table()["cuda"]]

CUDA12_PROPRIETARY = {
    **CUDA13,
    "driver_flavor": "proprietary",
    "cuda_version": "12.9.1",
    "nccl_version": "2.28.9",
    "pytorch_cuda_tag": "cu128",
}


def gpus(device: str, count: int = 1) -> list[PciGpu]:
    return [PciGpu(f"0000:{0x18 + 0x10 * i:02x}:00.0", device) for i in range(count)]


def check(found: list[PciGpu], stack: dict[str, Any]) -> tuple[str | None, list[str]]:
    return gpu_generations.host_problems(found, stack, TABLES, CUDA_VERSIONS)


def test_the_locks_used_here_fit_the_table() -> None:
    assert lock.check(CUDA13) == []
    assert lock.check(CUDA12_PROPRIETARY) == []


def test_a_v100_host_refuses_a_cuda_13_lock_in_one_line_naming_each_field_and_what_fits() -> None:
    line, warnings = check(gpus("1db1", 2), CUDA13)
    assert warnings == []
    assert line is not None and "\n" not in line
    assert line.startswith("2x Tesla V100 SXM2 16GB (Volta, 10de:1db1): ")
    assert (
        "cuda_version 13.0.2: CUDA 12.x is the last for Volta; lock a CUDA 12.x release (newest in the table:"
        in line
    )
    assert (
        "driver_flavor open: the open kernel modules need Turing or newer, not Volta; "
        "set driver_flavor: proprietary" in line
    )
    assert (
        "pytorch_cuda_tag cu130: PyTorch's CUDA 13 wheels carry kernels for Turing and newer, not Volta"
        in line
    )


def test_a_v100_runs_a_cuda_12_lock_with_the_proprietary_modules() -> None:
    assert check(gpus("1db1", 8), CUDA12_PROPRIETARY) == (None, [])


@pytest.mark.parametrize("device", ["1db1", "15f8", "13f2"])  # V100, P100, Tesla M60 (Maxwell)
def test_maxwell_pascal_and_volta_end_at_branch_580(device: str) -> None:
    line, _ = check(
        gpus(device), {**CUDA12_PROPRIETARY, "driver_branch": "590", "driver_version": "590.48.01"}
    )
    assert line is not None
    assert "driver_branch 590: R580 is the last driver branch for" in line
    assert "lock driver_branch 580 or older" in line


def test_a_k80_refuses_every_branch_after_470() -> None:
    line, _ = check(gpus("102d"), CUDA12_PROPRIETARY)
    assert line is not None and line.startswith("1x Tesla K80 (Kepler, 10de:102d): driver_branch 580: R470")


@pytest.mark.parametrize(
    ("device", "name"),
    [
        ("2901", "B200"),
        ("2941", "HGX GB200"),
        ("3182", "B300 SXM6 AC"),
        ("2bb5", "RTX PRO 6000 Blackwell Server Edition"),
        ("2342", "GH200 120GB / 480GB"),
    ],
)
def test_blackwell_and_grace_hopper_refuse_the_proprietary_modules(device: str, name: str) -> None:
    line, _ = check(gpus(device, 4), CUDA12_PROPRIETARY)
    assert line is not None
    assert f"driver_flavor proprietary: the proprietary kernel modules are unsupported on {name}; " in line
    assert line.endswith("set driver_flavor: open")
    assert check(gpus(device, 4), {**CUDA12_PROPRIETARY, "driver_flavor": "open"}) == (None, [])


def test_an_h100_runs_either_flavour_and_cuda_13() -> None:
    for stack in (CUDA13, CUDA12_PROPRIETARY):
        assert check(gpus("2330", 8), stack) == (None, [])


def test_a_mixed_host_names_every_model() -> None:
    line, _ = check([*gpus("1db1"), *gpus("2330")], CUDA13)
    assert line is not None
    assert line.startswith(
        "1x Tesla V100 SXM2 16GB (Volta, 10de:1db1), 1x H100 SXM5 80GB (Hopper, 10de:2330): "
    )


def test_an_unknown_device_id_is_warned_about_never_refused() -> None:
    line, warnings = check(gpus("ffff", 2), CUDA13)
    assert line is None
    assert warnings == [
        "GPU 10de:ffff (2x) is not in gpuprov's GPU table, so its generation is not checked against the "
        "lock; " + gpu_generations.HOW_TO_UPDATE
    ]


def test_a_cpu_wheel_is_never_refused_for_the_generation() -> None:
    line, _ = check(gpus("1db1"), {**CUDA12_PROPRIETARY, "pytorch_cuda_tag": "cpu"})
    assert line is None


def test_the_listing_keeps_gpus_only() -> None:
    text = (
        "0000:18:00.0 0x10de 0x1db1 0x030200\n"
        "0000:19:00.0 0x10de 0x2330 0x030000\n"
        "0000:18:00.1 0x10de 0x22e8 0x040300\n"  # the GPU's audio function
        "0000:a0:00.0 0x10de 0x22a3 0x068000\n"  # an NVSwitch (bridge)
        "0000:1a:00.0 0x10de unknown 0x030200\n"  # a device file that could not be read
        "garbage\n"
    )
    assert gpu_generations.parse_listing(text) == [
        PciGpu("0000:18:00.0", "1db1"),
        PciGpu("0000:19:00.0", "2330"),
        PciGpu("0000:1a:00.0", "unknown"),
    ]


# The data-center parts people run and the cards the recordings hold (tests/recorded), by pci.ids.
KNOWN = {
    "102d": "Kepler",  # Tesla K80
    "1180": "Kepler",  # GeForce GTX 680
    "1bb3": "Pascal",  # Tesla P4
    "15f8": "Pascal",  # Tesla P100 PCIe 16GB
    "1db1": "Volta",  # Tesla V100 SXM2 16GB
    "1db4": "Volta",  # Tesla V100 PCIe 16GB
    "1db5": "Volta",  # Tesla V100 SXM2 32GB
    "1eb8": "Turing",  # Tesla T4
    "1eb1": "Turing",  # Quadro RTX 4000
    "20b0": "Ampere",  # A100 SXM4 40GB
    "20b2": "Ampere",  # A100 SXM4 80GB
    "2236": "Ampere",  # A10
    "20b7": "Ampere",  # A30
    "2235": "Ampere",  # A40
    "2206": "Ampere",  # GeForce RTX 3080
    "27b8": "Ada",  # L4
    "26b9": "Ada",  # L40S
    "26b3": "Ada",  # RTX 5880 Ada Generation
    "2330": "Hopper",  # H100 SXM5 80GB
    "2331": "Hopper",  # H100 PCIe
    "2335": "Hopper",  # H200 SXM 141GB
    "2342": "Hopper",  # GH200
    "2901": "Blackwell",  # B200
    "2941": "Blackwell",  # HGX GB200
    "3182": "Blackwell",  # B300 SXM6 AC
    "2bb1": "Blackwell",  # RTX PRO 6000 Blackwell Workstation Edition
    "2bb5": "Blackwell",  # RTX PRO 6000 Blackwell Server Edition
    "2b85": "Blackwell",  # GeForce RTX 5090
}


@pytest.mark.parametrize(("device", "generation"), sorted(KNOWN.items()))
def test_the_table_knows_the_parts_people_run(device: str, generation: str) -> None:
    (model,) = gpu_generations.models(gpus(device), TABLES)
    assert model.generation == generation


def test_every_device_row_has_a_generation_and_every_rule_a_source() -> None:
    for device, row in TABLES.devices.items():
        assert re.fullmatch(r"[0-9a-f]{4}", device)
        assert gpu_generations.models(gpus(device), TABLES)[0].generation, (device, row)
    rows = TABLES.generations["generations"]
    assert all(row.get("source") for row in rows)
    for key in ("open_modules_source",):
        assert TABLES.generations[key]
    assert TABLES.generations["proprietary_unsupported"]["source"]
    assert all(row["source"] for row in TABLES.generations["pytorch_wheels"])
    names = [row["name"] for row in rows]
    assert TABLES.generations["open_modules_from"] in names
    assert set(TABLES.generations["proprietary_unsupported"]["generations"]) <= set(names)


def test_a_b200_host_refuses_a_lock_from_before_blackwell_naming_each_field() -> None:
    """CUDA 12.8 is the first toolkit for Blackwell, HGX B200 needs driver 570.133.20 or newer, and PyTorch's
    cu126 wheels stop at Hopper (sm_90): a lock like the sample's (R550, CUDA 12.4, cu124) cannot run."""
    old = {
        **CUDA13, "driver_branch": "550", "driver_version": "550.127.08", "cuda_version": "12.4.1",
        "cudnn_version": "9.5.1.17", "nccl_version": "2.21.5", "pytorch_version": "2.5.1",
        "pytorch_cuda_tag": "cu124",
    }  # fmt: skip
    line, _ = check(gpus("2901", 8), old)
    assert line is not None and line.startswith("8x B200 (Blackwell, 10de:2901): ")
    assert "driver_version 550.127.08: Blackwell needs driver 570.133.20 or newer" in line
    assert "cuda_version 12.4.1: Blackwell needs CUDA 12.8 or newer" in line
    assert "pytorch_cuda_tag cu124: PyTorch's cu124 wheels carry kernels up to Hopper, not Blackwell" in line


def test_a_b200_runs_a_cuda_13_lock_and_an_h100_runs_cu126() -> None:
    assert check(gpus("2901", 8), CUDA13) == (None, [])
    h100_cu126 = {**CUDA12_PROPRIETARY, "driver_flavor": "open", "pytorch_cuda_tag": "cu126"}
    assert check(gpus("2330", 8), h100_cu126)[0] is None
