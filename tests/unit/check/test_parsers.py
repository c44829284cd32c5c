"""The check parsers against recorded real outputs (tests/recorded/, each file with its source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.check import parsers

RECORDED = Path(__file__).parents[2] / "recorded"


def recorded(*parts: str) -> str:
    return (RECORDED.joinpath(*parts)).read_text()


@pytest.mark.parametrize(
    ("name", "version", "flavor", "arch"),
    [
        ("proprietary-x86_64-384.98", "384.98", "proprietary", "x86_64"),
        ("open-x86_64-565.57.01", "565.57.01", "open", "x86_64"),
        ("open-x86_64-525.60.11", "525.60.11", "open", "x86_64"),
        ("open-aarch64-35.3.1", "35.3.1", "open", "aarch64"),
    ],
)
def test_proc_driver_version(name: str, version: str, flavor: str, arch: str) -> None:
    module = parsers.proc_driver_version(recorded("proc-driver-nvidia-version", name))
    assert module == parsers.LoadedModule(version, flavor, arch)


@pytest.mark.parametrize(
    ("name", "version", "flavor"),
    [
        ("dmesg-open-aarch64-580.95.05", "580.95.05", "open"),
        ("dmesg-proprietary-aarch64-535.161.07", "535.161.07", "proprietary"),
    ],
)
def test_proc_driver_version_from_kernel_log_line(name: str, version: str, flavor: str) -> None:
    # The kernel logs the same pNVRM_ID after "NVRM: loading " (the recordings' SOURCES.md).
    text = recorded("proc-driver-nvidia-version", name).replace("NVRM: loading ", "NVRM version: ")
    module = parsers.proc_driver_version(text)
    assert module is not None and (module.version, module.flavor, module.arch) == (version, flavor, "aarch64")


def test_proc_driver_version_without_module() -> None:
    assert parsers.proc_driver_version("") is None


@pytest.mark.parametrize(
    ("name", "driver", "cuda", "attached", "persistence", "uuid"),
    [
        (
            "query-1xRTX5090-570.124.06",
            "570.124.06",
            "12.8",
            1,
            "Enabled",
            "GPU-ea2294a3-4d61-1757-8aed-f91723f16ad2",
        ),
        ("query-1xV100-535.86.10", "535.86.10", "12.2", 1, "Disabled", None),
        ("query-1xA40-550.127.05", "550.127.05", "12.4", 10, "Enabled", None),
    ],
)
def test_smi_query(
    name: str, driver: str, cuda: str, attached: int, persistence: str, uuid: str | None
) -> None:
    query = parsers.smi_query(recorded("nvidia-smi", name))
    assert (query.driver_version, query.cuda_version, query.attached) == (driver, cuda, attached)
    assert len(query.gpus) == 1  # the recordings keep the first GPU's section only
    gpu = query.gpus[0]
    assert gpu["Persistence Mode"] == persistence
    assert gpu["bus_id"].startswith("00000000:")
    if uuid:
        assert gpu["GPU UUID"] == uuid
        assert gpu["MIG Mode/Current"] == "N/A"  # a nested field, named by its path


def test_smi_query_cuda_not_found() -> None:
    query = parsers.smi_query(recorded("nvidia-smi", "query-d-MEMORY-PERFORMANCE-4xRTXPRO6000-580.105.06"))
    assert (query.driver_version, query.cuda_version, query.attached) == ("580.105.06", None, 4)
    assert query.gpus[0]["Performance State"] == "P8"


def test_smi_csv() -> None:
    rows = parsers.smi_csv(recorded("nvidia-smi", "csv-2xGPU-570.86.15"))
    assert [r["name"] for r in rows] == ["NVIDIA TITAN V", "NVIDIA RTX 5880 Ada Generation"]
    assert rows[1] == {
        "compute_cap": "8.9",
        "compute_mode": "Default",
        "driver_version": "570.86.15",
        "name": "NVIDIA RTX 5880 Ada Generation",
        "index": "1",
    }


def test_smi_csv_noheader_needs_fields() -> None:
    body = recorded("nvidia-smi", "csv-2xGPU-570.86.15").split("\n", 1)[1]
    fields = ["compute_cap", "compute_mode", "driver_version", "name", "index"]
    assert parsers.smi_csv(body, header=False, fields=fields)[0]["index"] == "0"
    with pytest.raises(ValueError):
        parsers.smi_csv(body, header=False)


def test_nvlink_status_inactive_links() -> None:
    gpus = parsers.nvlink_status(recorded("nvidia-smi", "nvlink-status-V100-inactive"))
    assert [(g.index, g.name) for g in gpus] == [(3, "Tesla V100-SXM2-32GB")]
    assert gpus[0].links[0] == "25.781 GB/s"
    assert gpus[0].inactive == [3, 5]


def test_xid_events_dmesg_T() -> None:
    events = parsers.xid_events(recorded("dmesg-xid", "dmesg-T-akash-535.183.01"))
    assert [(e.pci, e.code) for e in events] == [
        ("0000:00:05", 43),
        ("0000:00:05", 43),
        ("0000:00:07", 31),
        ("0000:00:08", 94),
    ]
    assert events[0].text.startswith("pid=1045242, name=pt_main_thread")
    assert events[3].text.startswith("pid='<unknown>'")


def test_xid_events_plain_dmesg_and_journal() -> None:
    assert [e.code for e in parsers.xid_events(recorded("dmesg-xid", "dmesg-bumblebee"))] == [32, 32, 31]
    events = parsers.xid_events(recorded("dmesg-xid", "journal-k-xid79"))
    assert [(e.pci, e.code, e.text) for e in events] == [("0000:2b:00", 79, "GPU has fallen off the bus.")]


def test_ibstat_tabs_and_other_tools_lines() -> None:
    ports = parsers.ibstat(recorded("ibstat", "gpud-ib-200"))
    assert ports == [parsers.IbPort("mlx5_7", 1, "Active", "LinkUp", 200, "InfiniBand")]


def test_ibstat_two_ports() -> None:
    ports = parsers.ibstat(recorded("ibstat", "rdma-core-mlx4-2port"))
    assert [(p.ca, p.port, p.state, p.physical_state, p.rate) for p in ports] == [
        ("mlx4_0", 1, "Down", "Disabled", 10),
        ("mlx4_0", 2, "Active", "LinkUp", 56),
    ]


def test_ibstat_spaces_roce() -> None:
    ports = parsers.ibstat(recorded("ibstat", "mooncake-roce"))
    assert [(p.ca, p.state, p.rate, p.link_layer) for p in ports] == [
        ("mlx5_0", "Active", 200, "Ethernet"),
        ("mlx5_1", "Active", 200, "Ethernet"),
        ("mlx5_10", "Down", None, ""),
    ]


def first_gpu(name: str) -> dict[str, str]:
    return parsers.smi_query(recorded("nvidia-smi", name)).gpus[0]


@pytest.mark.parametrize(
    ("name", "health"),
    [
        ("query-full-1xH100SXM-565.57.01", parsers.MemoryHealth(False, False, False, 0, 0)),
        ("query-full-1xA40-550.127.05", parsers.MemoryHealth(False, False, False, 0, 0)),  # 10 correctable
        ("query-full-pending-remap-A100SXM4-555.42.02", parsers.MemoryHealth(True, False, False, 0, 0)),
        ("query-full-1xV100-550.127.05", parsers.MemoryHealth(False, False, False, 0, 0)),  # Double Bit/Total
        ("query-full-1xRTX5090-570.124.06", parsers.MemoryHealth(False, False, False, 0, 0)),  # all N/A
        ("query-full-1xGTX680-470.256.02", parsers.MemoryHealth(False, False, False, 0, 0)),
    ],
)
def test_memory_health(name: str, health: parsers.MemoryHealth) -> None:
    assert parsers.memory_health(first_gpu(name)) == health


def test_memory_health_reads_both_ecc_layouts() -> None:
    # Each recorded layout's uncorrectable counters, given a count: pre-Ampere "Double Bit/Total", later DRAM.
    v100 = recorded("nvidia-smi", "query-full-1xV100-550.127.05")
    total = "                Total                     : 0\n"
    assert v100.count(total) == 4  # Volatile and Aggregate, Single and Double Bit: the 2nd and 4th are Double
    parts = v100.split(total)
    changed = (
        parts[0]
        + total
        + parts[1]
        + total.replace(": 0", ": 2")
        + parts[2]
        + total
        + parts[3]
        + total
        + parts[4]
    )
    gpu = parsers.smi_query(changed).gpus[0]
    assert parsers.memory_health(gpu).uncorrectable_volatile == 2
    h100 = recorded("nvidia-smi", "query-full-1xH100SXM-565.57.01").replace(
        "DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : 3"
    )
    health = parsers.memory_health(parsers.smi_query(h100).gpus[0])
    assert (health.uncorrectable_volatile, health.uncorrectable_aggregate) == (3, 3)


@pytest.mark.parametrize(
    ("name", "active"),
    [
        ("query-full-1xH100SXM-565.57.01", ["Idle"]),
        ("query-full-1xA40-550.127.05", ["SW Power Cap"]),
        ("query-full-1xRTX5090-570.124.06", ["SW Power Cap"]),
        ("query-full-1xGTX1050Ti-535.161.07", []),
        ("query-full-1xGTX680-470.256.02", None),  # "Clocks Throttle Reasons : N/A"
    ],
)
def test_active_clock_reasons(name: str, active: list[str] | None) -> None:
    assert parsers.active_clock_reasons(first_gpu(name)) == active


def test_clock_reasons_under_their_pre_535_name() -> None:
    # A section only, as pasted (SOURCES.md): indented as inside a GPU.
    gpu = parsers.smi_query(
        "GPU 00000000:01:00.0\n" + recorded("nvidia-smi", "section-clocks-throttle-reasons-455.10")
    ).gpus[0]
    assert parsers.active_clock_reasons(gpu) == ["Idle"]


@pytest.mark.parametrize(
    ("name", "link"),
    [
        ("query-full-1xH100SXM-565.57.01", parsers.PcieLink(5, 5, 16, 16)),
        ("query-full-1xA40-550.127.05", parsers.PcieLink(1, 4, 16, 16)),  # idle: the link drops to Gen1
        ("query-full-1xRTX5090-570.124.06", parsers.PcieLink(1, 5, 8, 16)),
        ("query-full-1xGTX680-470.256.02", None),  # N/A
    ],
)
def test_pcie_link(name: str, link: parsers.PcieLink | None) -> None:
    assert parsers.pcie_link(first_gpu(name)) == link


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        (
            "status-dkms3-nvidia-535.86.05",
            parsers.DkmsEntry("nvidia", "535.86.05", "6.5.0-060500rc5-generic", "x86_64", "installed"),
        ),
        (
            "status-dkms2-nvidia-460.91.03",
            parsers.DkmsEntry("nvidia", "460.91.03", "5.11.0-36-generic", "x86_64", "installed"),
        ),
    ],
)
def test_dkms_status(name: str, entry: parsers.DkmsEntry) -> None:
    assert parsers.dkms_status(recorded("dkms", name))[0] == entry
