"""The peermem check: can NCCL use GPUDirect RDMA on the RDMA devices it will use?

NCCL registers GPU memory with the HCA through DMA-BUF where it can (NCCL_DMABUF_ENABLE, default on since
2.13; its src/init.cc `dmaBufSupported`: a CUDA driver of 11.7 or later and a device that reports
CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED), else through the nvidia_peermem module. NVIDIA recommends DMA-BUF
over nvidia-peermem (GPU Operator, "GPUDirect RDMA and GPUDirect Storage"). DMA-BUF needs the open kernel
module (R515 and later: the proprietary flavour does not export GPU memory as DMA-BUF to RDMA), and a kernel
whose RDMA core imports DMA-BUF (Linux 5.12, "RDMA/umem: Support importing dma-buf as user memory region").
An HCA NCCL does not use (NCCL_IB_HCA leaves it out: a storage or management port) needs neither.
"""

from __future__ import annotations

import re

from gpuprov.check import busbw_threshold, expected, parsers
from gpuprov.check.host_view import NO_GPU, HostView
from gpuprov.check.results import Result

DMABUF_KERNEL = (5, 12)
DMABUF_DRIVER_BRANCH = 515
PEERMEM_MODULES = {"nvidia_peermem", "nv_peer_mem"}  # the driver's, and Mellanox's older one
SOURCE = (
    "NCCL src/init.cc dmaBufSupported (NCCL_DMABUF_ENABLE); NVIDIA GPU Operator docs, GPUDirect RDMA "
    "(DMA-BUF recommended over nvidia-peermem); NVIDIA GPUDirect RDMA docs (https://docs.nvidia.com/cuda/gpudirect-rdma/)"
)


def nccl_hcas(view: HostView) -> tuple[list[str], str]:
    """The RDMA devices NCCL will use (all, unless NCCL_IB_HCA picks some), and NCCL_IB_HCA's value."""
    hca = expected.nccl_settings(view.vars).get("NCCL_IB_HCA", "")
    names = ",".join(entry.split(":")[0] for entry in hca.split(","))  # `mlx5_0:1`: the CA mlx5_0
    devices = [str(d) for d in view.data.get("infiniband") or []]
    return [d for d in devices if not hca or busbw_threshold.selected(d, names)], hca


def dmabuf_missing(view: HostView) -> list[str]:
    """What keeps NCCL from DMA-BUF on this host; empty when nothing does."""
    missing = []
    module = parsers.proc_driver_version(str(view.data.get("proc_driver_version") or ""))
    if module is None:
        missing.append("no NVIDIA kernel module loaded")
    elif module.flavor != "open" or int(module.version.split(".")[0]) < DMABUF_DRIVER_BRANCH:
        missing.append(f"the {module.flavor} kernel module {module.version} (DMA-BUF needs the open one)")
    kernel = _release(str(view.data.get("kernel") or ""))
    if kernel < DMABUF_KERNEL:
        missing.append(f"kernel {view.data.get('kernel')} (DMA-BUF needs 5.12 or later)")
    if expected.nccl_settings(view.vars).get("NCCL_DMABUF_ENABLE", "1").strip() == "0":
        missing.append("NCCL_DMABUF_ENABLE=0")
    return missing


def peermem(view: HostView) -> list[Result]:
    if not view.has_gpus:
        return view.not_applicable("peermem", NO_GPU)
    if not view.data.get("infiniband"):
        return view.not_applicable("peermem", "no RDMA device (/sys/class/infiniband is empty)")
    used, hca = nccl_hcas(view)
    if not used:
        return view.not_applicable("peermem", f"NCCL_IB_HCA={hca} picks none of the host's RDMA devices")
    loaded = sorted(set(view.data.get("modules") or []) & PEERMEM_MODULES)
    missing = dmabuf_missing(view)
    way = "DMA-BUF" if not missing else f"{', '.join(loaded)} loaded" if loaded else ""
    return [
        view.verdict(
            "peermem",
            bool(way),
            measured=f"{way} for {', '.join(used)}" if way else "neither DMA-BUF nor nvidia_peermem",
            expected="DMA-BUF (open kernel module, kernel >= 5.12) or nvidia_peermem loaded",
            source=SOURCE,
            detail="; ".join(missing) if not way else "",
            action="use the open kernel module on a kernel >= 5.12 (DMA-BUF, NVIDIA's recommendation), or "
            "modprobe nvidia_peermem (and add it to /etc/modules-load.d)",
        )
    ]


def _release(text: str) -> tuple[int, int]:
    """`6.8.0-45-generic` -> (6, 8); (0, 0) when unreadable."""
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)
