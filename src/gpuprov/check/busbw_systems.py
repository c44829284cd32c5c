"""Published all-reduce bus bandwidths of whole systems: one host whose GPUs NVSwitches join, every GPU in a
ring all-reduce (`NCCL_ALGO=Ring`, as check runs it). Where a system is listed here its figure is the bar;
elsewhere the NVLink-links rule of busbw_threshold.py applies.

Ring, not NCCL's default: on H100/H200 the default all-reduce is NVLink SHARP (NVLS), whose busbw (~480 GB/s
on 8 GPUs) is not bandwidth on the wire and is not there where NVLS is not (fabric manager's multicast, the
driver, the NCCL release); the ring figure is what every healthy NVSwitch host of the system reaches.
docs/check-thresholds.md has this table with each source and margin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The threshold is this fraction of the published figure. check moves 1 GiB per all-reduce, where published
# sweeps are within ~7% of their 8 GiB peak (NVIDIA/nccl#2409: 216.5 vs 231 GB/s, see onhost/allreduce.py);
# the rest is one run's noise. Azure's health checks keep 0.96 of NVLS's 480 GB/s at 16 GiB (460, below).
MARGIN = 0.85


@dataclass(frozen=True)
class System:
    name: str
    product: re.Pattern[str]  # nvidia-smi's "Product Name" of each GPU
    nvlinks: int  # the NV# count `nvidia-smi topo -m` shows between every GPU pair
    gbps: float  # published ring all-reduce busbw, GB/s
    source: str

    @property
    def threshold(self) -> float:
        return round(self.gbps * MARGIN, 1)


SYSTEMS = (
    System(
        "H100 SXM (NVLink 4, NVSwitch)",
        re.compile(r"H100 80GB HBM3|H100 SXM"),
        18,
        370.0,
        "NCCL's developers: 370 GB/s effective of NVLink 4's 450, seen as busbw with NCCL_ALGO=RING "
        "(NVIDIA/nccl-tests#212, NVIDIA/nccl#1442); 365-370 GB/s ring on 2-8 H100 SXM (NVIDIA/nccl#1455)",
    ),
    System(
        "H200 SXM (NVLink 4, NVSwitch)",
        re.compile(r"H200"),
        18,
        370.0,
        "the same 18 NVLink 4 links and NVSwitches as H100 SXM: NVIDIA/nccl-tests#212's 370 GB/s ring; "
        "NVLS peaks alike (475 GB/s on 8 x H200, NVIDIA/nccl-tests#272)",
    ),
    System(
        "A100 SXM4 (NVLink 3, NVSwitch)",
        re.compile(r"A100-SXM4"),
        12,
        228.0,
        "Azure's health check for 8 x A100-SXM4 (ND96asr_v4): all-reduce >= 228 GB/s at 8 GiB "
        "(Azure/azurehpc-health-checks conf/nd96asr_v4.conf); 220 GB/s on 8 x A100-SXM4-80GB "
        "(NVIDIA/nccl-tests#228)",
    ),
)


def match(products: set[str], nvlinks: set[int]) -> System | None:
    """The listed system whose GPUs these are (every GPU the same model, every pair the same NV#)."""
    if len(products) != 1 or len(nvlinks) != 1:
        return None
    product, links = next(iter(products)), next(iter(nvlinks))
    return next((s for s in SYSTEMS if s.product.search(product) and s.nvlinks == links), None)
