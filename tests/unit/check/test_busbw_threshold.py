"""The bus bandwidth threshold from the hardware, read from recorded real `ibstat` outputs
(tests/recorded/ibstat, each with its source) and sysfs link speeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov.check import busbw_threshold as bt

IBSTAT = Path(__file__).parents[2] / "recorded" / "ibstat"
SMI = Path(__file__).parents[2] / "recorded" / "nvidia-smi"


def ibstat(name: str) -> dict[str, Any]:
    return {"ibstat": {"rc": 0, "stdout": (IBSTAT / name).read_text()}}


def test_one_active_infiniband_port() -> None:
    # gpud-ib-200: mlx5_7 port 1 Active / LinkUp at 200 Gb/s (the ibpanic line about mlx5_8 is ignored)
    rate = bt.host_rate(ibstat("gpud-ib-200"), "", gpus=8)
    assert rate == bt.HostRate(200, "1 x 200 Gb/s InfiniBand (ibstat)", bt.IB_EFFICIENCY)


def test_active_roce_ports_count_up_to_the_gpus_and_down_ports_not_at_all() -> None:
    # mooncake-roce: mlx5_0 and mlx5_1 Active at 200 (Ethernet link layer), mlx5_10 Down
    data = ibstat("mooncake-roce")
    assert bt.host_rate(data, "", gpus=8) == bt.HostRate(400, "2 x 200 Gb/s Ethernet (ibstat)", 0.96)
    one_gpu = bt.host_rate(data, "", gpus=1)  # one GPU uses its nearest NIC only
    assert one_gpu is not None and one_gpu.gbits == 200


def test_nccl_ib_hca_limits_the_ports() -> None:
    data = ibstat("mooncake-roce")  # mlx5_0 and mlx5_1 Active at 200
    picked = bt.host_rate(data, "", gpus=8, ib_hca="=mlx5_1:1")
    assert picked is not None and picked.how == "1 x 200 Gb/s Ethernet (ibstat)"
    assert bt.host_rate(data, "", gpus=8, ib_hca="^mlx5") is None  # every CA excluded, no interface named


def test_a_disabled_port_is_not_counted() -> None:
    # rdma-core-mlx4-2port: port 1 Down / Disabled at 10, port 2 Active / LinkUp at 56
    rate = bt.host_rate(ibstat("rdma-core-mlx4-2port"), "", gpus=2)
    assert rate is not None and (rate.gbits, rate.how) == (56, "1 x 56 Gb/s InfiniBand (ibstat)")


def test_ibstat_that_failed_falls_back_to_the_nccl_interface_speed() -> None:
    data = {
        "ibstat": {"rc": None, "missing": True, "stdout": ""},
        "interface_speeds": {"eth0": 100000, "eth1": 25000, "lo": None, "docker0": 10000},
    }
    rate = bt.host_rate(data, "eth", gpus=8)  # a prefix: eth0 and eth1; the slower one counts
    assert rate == bt.HostRate(25, "eth1 25 Gb/s (sysfs speed)", bt.SOCKET_EFFICIENCY)
    assert bt.host_rate(data, "=eth0", gpus=8) == bt.HostRate(100, "eth0 100 Gb/s (sysfs speed)", 0.40)
    assert bt.host_rate(data, "", gpus=8) is None  # NCCL picks the interface: unknown which
    assert bt.host_rate(data, "ib", gpus=8) is None  # no such interface


@pytest.mark.parametrize(
    ("ifname", "interface", "picked"),
    [
        ("eth", "eth0", True),
        ("eth", "ens5", False),
        ("=eth0", "eth01", False),
        ("^docker,lo", "docker0", False),
        ("^docker,lo", "eth0", True),
        ("^=eth0", "eth0", False),
        ("ens,eth", "eth2", True),
        # the leading = and ^ hold for the whole list (NCCL's parseStringList), and a :port is no name
        ("=mlx5_0,mlx5_1", "mlx5_10", False),
        ("=mlx5_0,mlx5_1", "mlx5_1", True),
        ("^=mlx5_0,mlx5_1", "mlx5_1", False),
        ("mlx5_0:1,mlx5_1:1", "mlx5_1", True),
    ],
)
def test_nccl_socket_ifname_rules(ifname: str, interface: str, picked: bool) -> None:
    assert bt.selected(interface, ifname) is picked


def test_the_slowest_host_sets_the_threshold_with_its_source() -> None:
    fast = bt.HostRate(400, "2 x 200 Gb/s InfiniBand (ibstat)", bt.IB_EFFICIENCY)
    slow = bt.HostRate(200, "1 x 200 Gb/s InfiniBand (ibstat)", bt.IB_EFFICIENCY)
    threshold = bt.from_hardware([("node1", fast), ("node2", slow)])
    assert isinstance(threshold, bt.Threshold)
    # 200 Gb/s = 25 GB/s x 0.96 = 24 GB/s expected (NVIDIA/nccl#412's 24 GB/s on HDR), x 0.8 = 19.2
    assert threshold.gbps == pytest.approx(19.2)
    assert threshold.source.startswith("hardware: node2's 1 x 200 Gb/s InfiniBand (ibstat) = 25 GB/s x 0.96")


def test_an_unknown_host_rate_gives_no_hardware_threshold() -> None:
    rate = bt.HostRate(200, "x", bt.IB_EFFICIENCY)
    bar = bt.from_hardware([("node1", rate), ("node2", None)])
    assert isinstance(bar, bt.NoBar) and "no network rate known on node2" in bar.reason


def test_without_nccl_ib_hca_a_slower_port_is_left_out() -> None:
    # One host's ibstat listing two real CAs: gpud-ib-200's mlx5_7 at 200 and rdma-core's mlx4_0 port 2 at 56
    # (a storage or management port beside the fabric's: the slowest would set a bar far too low).
    data = {
        "ibstat": {
            "rc": 0,
            "stdout": (IBSTAT / "gpud-ib-200").read_text() + (IBSTAT / "rdma-core-mlx4-2port").read_text(),
        }
    }
    rate = bt.host_rate(data, "", gpus=8)
    assert rate is not None and rate.gbits == 200
    assert (
        rate.how
        == "1 x 200 Gb/s InfiniBand (ibstat), 1 slower port(s) left out (set NCCL_IB_HCA to name NCCL's)"
    )
    named = bt.host_rate(data, "", gpus=8, ib_hca="=mlx4_0")  # NCCL_IB_HCA names the CAs NCCL uses
    assert named is not None and (named.gbits, named.how) == (56, "1 x 56 Gb/s InfiniBand (ibstat)")


def nvlink(text: str) -> dict[str, Any]:
    return {"smi_nvlink": {"rc": 0, "stdout": text}}


def test_nvlink_rate_is_the_slowest_gpus_active_links() -> None:
    # nccl-tests#228's 8 x A100-SXM4, GPUs 0 and 1 as posted (the poster cut GPU 2 after its first link):
    # 12 x 25 GB/s = 300 GB/s per direction; x 0.73 x 0.8 = 175.2 GB/s busbw (220 measured in that thread)
    text = (SMI / "nvlink-status-8xA100SXM4").read_text().split("GPU 2:")[0]
    rate = bt.nvlink_rate(nvlink(text))
    assert rate == bt.HostRate(
        2400, "GPU 0: 12 x 25 GB/s NVLink (nvidia-smi nvlink -s)", bt.NVLINK_EFFICIENCY
    )
    threshold = bt.from_hardware([("node1", rate)])
    assert isinstance(threshold, bt.Threshold) and threshold.gbps == pytest.approx(175.2)
    assert threshold.source == (
        "hardware: node1's GPU 0: 12 x 25 GB/s NVLink (nvidia-smi nvlink -s) = 300 GB/s x 0.73 "
        "(NCCL's published efficiency) x 0.8 margin"
    )


def test_inactive_links_lower_the_nvlink_rate() -> None:
    # azhpc-diagnostics#73's V100 GPU 3: 4 of its 6 links active at 25.781 GB/s
    rate = bt.nvlink_rate(nvlink((SMI / "nvlink-status-V100-inactive").read_text()))
    assert rate is not None and rate.how == "GPU 3: 4 x 25.781 GB/s NVLink (nvidia-smi nvlink -s)"
    assert rate.gbits / 8 == pytest.approx(103.124)
    # with the A100 recording's whole text, the slowest GPU is the one the poster cut to a single link
    cut = bt.nvlink_rate(nvlink((SMI / "nvlink-status-8xA100SXM4").read_text()))
    assert cut is not None and cut.how.startswith("GPU 2: 1 x 25 GB/s")


def test_no_nvlink_rate_without_an_active_link_on_every_gpu() -> None:
    v100 = (SMI / "nvlink-status-V100-inactive").read_text()
    all_down = v100.replace("25.781 GB/s", "<inactive>")  # a GPU on PCIe only
    assert bt.nvlink_rate(nvlink(all_down)) is None
    assert bt.nvlink_rate(nvlink("")) is None  # no NVLink GPU listed
    assert bt.nvlink_rate({"smi_nvlink": {"rc": 6, "stdout": v100}}) is None  # the command failed
    assert bt.nvlink_rate({}) is None
    assert bt.link_gbytes("<inactive>") == 0 and bt.link_gbytes("26.562 GB/s") == pytest.approx(26.562)


def test_the_inventory_threshold() -> None:
    assert bt.from_inventory(None) is None
    assert bt.from_inventory("12.5") == bt.Threshold(12.5, "inventory (gpuprov_check_min_busbw_gbps)")
    for bad in ("fast", "0", "-3"):
        with pytest.raises(ValueError):
            bt.from_inventory(bad)


def topo(name: str) -> dict[str, Any]:
    return {"rc": 0, "stdout": (SMI / name).read_text()}


def test_one_host_with_every_gpu_pair_on_nvlink_gets_its_systems_published_figure() -> None:
    # nccl#1453's 8 GPUs with NV18 between every pair, named as the recorded H100's nvidia-smi -q names it
    data = {"smi_topo": topo("topo-m-8xNV18-9NIC"), "smi_q": topo("query-full-1xH100-580.159.04")}
    bar = bt.one_host("node1", data)
    assert isinstance(bar, bt.Threshold)
    assert bar.gbps == pytest.approx(314.5)  # 370 GB/s ring (NVIDIA/nccl-tests#212) x 0.85
    assert bar.source.startswith("published: H100 SXM (NVLink 4, NVSwitch), ring all-reduce 370 GB/s x 0.85")


def test_an_unlisted_nvswitch_system_falls_back_to_its_nvlink_links() -> None:
    data = {"smi_topo": topo("topo-m-8xNV18-9NIC"), "smi_nvlink": topo("nvlink-status-V100-inactive")}
    bar = bt.one_host("node1", data)  # no nvidia-smi -q: no model to look up
    assert isinstance(bar, bt.Threshold) and bar.gbps == pytest.approx(60.224)
    down = {"smi_topo": data["smi_topo"], "smi_nvlink": {"rc": 0, "stdout": ""}}
    assert isinstance(bt.one_host("node1", down), bt.NoBar)


@pytest.mark.parametrize(
    ("recording", "says"),
    [
        ("topo-m-8xA100PCIe-NV12-pairs", "NVLink between 4 of 28 pairs, PCIe between the others"),
        ("topo-m-8xRTX4090-PCIe", "8 GPUs, PCIe only, no NVLink"),
        ("topo-m-1xH100-580.159.04", "1 GPU"),
    ],
)
def test_bridged_pairs_pcie_and_one_gpu_give_no_bar(recording: str, says: str) -> None:
    # The bridged pairs have active NVLinks on every GPU: nvidia-smi nvlink -s alone would give a bar.
    data = {"smi_topo": topo(recording), "smi_nvlink": topo("nvlink-status-8xA100SXM4")}
    bar = bt.one_host("node1", data)
    assert isinstance(bar, bt.NoBar) and says in bar.reason
    assert isinstance(bt.one_host("node1", {"smi_nvlink": data["smi_nvlink"]}), bt.NoBar)  # topo did not run
