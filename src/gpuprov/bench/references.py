"""Published throughput figures shown beside measured rows of the same GPU model, precision and method.

A figure is shown only where it was measured the way bench measures: the exact GPU model (an A100-SXM4-40GB
figure says nothing about an A100-PCIE-40GB, whose power limit is 250 W against 400 W), the same precision,
and the same data method (published numbers vary by 1.5x on method alone). Each row keeps its source (a
pinned URL) and its method in words. Left out, with the reason in docs/bench.md: NVIDIA Deep Learning
Examples' ResNet-50 rows (real ImageNet JPEGs through the input pipeline: an end-to-end figure, not the
compute-only one bench's synthetic data gives), the guides' own tables (no source or method), figures
quoted without a readable source, FlagPerf's "amp" row (its README says bf16 serves as its 16-bit format,
so whether that row ran fp16 is not stated), and any H100 row (none with img/s and its method was found).
"""

from __future__ import annotations

from dataclasses import dataclass

# How a figure treats input data, by bench's --data: "synthetic" keeps one batch on the GPU, so its img/s
# leaves out data loading; a published figure that excludes the data I/O time measures the same thing.
DATA_METHOD = {"synthetic": "compute only", "loader": "host DataLoader of generated images"}


@dataclass(frozen=True)
class Reference:
    model: str
    gpu: str  # the exact model as nvidia-smi names it, less its "NVIDIA " / "Tesla " prefix
    precision: str  # bench's --precision: bf16, fp16 (autocast) or fp32 (TF32 convolutions on Ampere)
    data: str  # a DATA_METHOD value
    gpus: int
    nodes: int
    img_s: float
    source: str
    method: str


_FLAGPERF = (
    "FlagPerf, resnet50-pytorch on NVIDIA, README 'p_core' column "
    "(https://github.com/FlagOpen/FlagPerf/blob/0078403cff4cff3120a75ffdeb6ae734bae09377/"
    "training/nvidia/resnet50-pytorch/README.md)"
)
_FLAGPERF_METHOD = (
    "DGX A100 40GB (NVIDIA_A100-SXM4-40GB), 200 Gb/s InfiniBand between nodes, pytorch 1.8, ImageNet; "
    "p_core: throughput without the data I/O time"
)


def _flagperf(precision: str, gpus: int, nodes: int, img_s: float, note: str) -> Reference:
    return Reference(
        "resnet50", "A100-SXM4-40GB", precision, "compute only", gpus, nodes, img_s, _FLAGPERF,
        f"{_FLAGPERF_METHOD}, {note}",
    )  # fmt: skip


REFERENCES = (
    _flagperf("fp32", 1, 1, 799, "fp32, batch 256 per GPU"),
    _flagperf("fp32", 8, 1, 6105, "fp32, batch 256 per GPU"),
    _flagperf("fp32", 16, 2, 11874, "fp32, batch 256 per GPU"),
    _flagperf("bf16", 8, 1, 9818, "bf16, batch 512 per GPU"),
)

_VENDOR_PREFIXES = ("NVIDIA ", "TESLA ")


def gpu_model(measured_gpu: str) -> str:
    """nvidia-smi's name less its vendor prefix, upper case: 'NVIDIA A100-SXM4-40GB' -> 'A100-SXM4-40GB'."""
    name = " ".join(measured_gpu.upper().replace("_", " ").split())
    for prefix in _VENDOR_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def for_run(model: str, measured_gpu: str | None, precision: str, data: str) -> list[Reference]:
    """The references for this model on exactly this GPU model, precision and data method (none on a CPU)."""
    if not measured_gpu:
        return []
    wanted = gpu_model(measured_gpu)
    method = DATA_METHOD[data]
    return [
        r
        for r in REFERENCES
        if r.model == model and r.precision == precision and r.data == method and r.gpu.upper() == wanted
    ]
