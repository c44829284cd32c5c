"""The lowest matmul rate a healthy GPU of a known model reaches: the published achieved figure x a margin.

The figures are Maximum Achievable Matmul FLOPS (stas00/ml-engineering compute/accelerator/README.md,
"Maximum Achievable Matmul FLOPS comparison table": bf16, the best of a search over shapes, CUDA 12.1):
achieved on a real GPU, unlike the datasheet peak. gpuprov multiplies fp16 16384 x 16384 matrices; on A100
and H100 the dense fp16 and bf16 Tensor Core peaks are the same (NVIDIA's A100 and H100 datasheets: 312 and
989 TFLOPS), and one square shape is not the best shape: the recorded H100 SXM (tests/recorded/gpu-host-h100)
ran 659.9 TFLOPS, 0.83 of 792.1. So the margin is 0.75: a GPU below it is power-capped, clock-stuck or hot,
which the relative rule misses when every GPU of the host is. Keyed by nvidia-smi's Product Name; a model not
listed has no floor (said in the result).
"""

from __future__ import annotations

from dataclasses import dataclass

MARGIN = 0.75
SOURCE = (
    "stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul FLOPS (bf16, CUDA 12.1) "
    f"x {MARGIN:g}"
)


@dataclass(frozen=True)
class Published:
    model: str  # the table's row
    tflops: float

    @property
    def floor(self) -> float:
        return round(self.tflops * MARGIN, 1)


_H100_SXM = Published("NVIDIA H100 SXM", 792.1)
_A100_SXM = Published("NVIDIA A100 SXM", 267.9)
_A100_PCIE = Published("NVIDIA A100 PCIe", 256.4)

# Product Names as nvidia-smi prints them (tests/recorded/nvidia-smi; the A100 80GB PCIe: NVIDIA's container
# toolkit install guide's `nvidia-smi -L` example). The A100 PCIe 40GB (250 W, the 80GB card 300 W) is left
# out: the table does not say which PCIe card its figure is from.
BY_PRODUCT_NAME: dict[str, Published] = {
    "NVIDIA H100 80GB HBM3": _H100_SXM,
    "NVIDIA A100-SXM4-80GB": _A100_SXM,
    "NVIDIA A100-SXM4-40GB": _A100_SXM,
    "NVIDIA A100 80GB PCIe": _A100_PCIE,
}


def for_gpus(names: list[str]) -> Published | None:
    """The published figure for a host whose GPUs are all one listed model; None otherwise."""
    models = set(names)
    if len(models) != 1:
        return None
    return BY_PRODUCT_NAME.get(models.pop())
