"""Published throughput figures shown beside measured rows of the same model, GPU type and precision class.

Each row keeps its source (a pinned URL) and method: published numbers vary by 1.5x on method alone, so a
figure without its method says little. Only figures read in their source are here; the guides' own tables
(450 / 1700 / 3400 img/s ...) name no source or method and are left out, as are figures quoted without one
(an H100 2616 img/s, a Lambda A100 1582 img/s: not found in a source that could be read).
"""

from __future__ import annotations

from dataclasses import dataclass

# "mixed": bf16 or fp16 autocast (NVIDIA's "mixed precision", FlagPerf's amp/bf16); "fp32": fp32 weights
# and activations, where Ampere and later GPUs run convolutions and matmuls as TF32 by default.
PRECISION_CLASS = {"bf16": "mixed", "fp16": "mixed", "fp32": "fp32"}


@dataclass(frozen=True)
class Reference:
    model: str
    gpu: str  # matched as a word in the measured GPU's name ("A100" in "NVIDIA A100-SXM4-80GB")
    precision: str  # a PRECISION_CLASS value
    gpus: int
    nodes: int
    img_s: float
    source: str
    method: str


_DLE = (
    "NVIDIA Deep Learning Examples, ResNet50 v1.5 for PyTorch, README 'Training performance results' "
    "(https://github.com/NVIDIA/DeepLearningExamples/blob/291f0d02e815b148fa5c2b81bf07aa3552142895/"
    "PyTorch/Classification/ConvNets/resnet50v1.5/README.md)"
)
# The batch per GPU is configs.yml's for the platform and precision (same commit's ConvNets/configs.yml).
_DLE_A100 = "DGX A100 (A100 80GB), pytorch-21.03 NGC container, ImageNet, batch 256 per GPU"
_DLE_V100 = "DGX-1 (V100 16GB), pytorch-21.03 NGC container, ImageNet"
_FLAGPERF = (
    "FlagPerf, resnet50-pytorch on NVIDIA, README 'p_core' column "
    "(https://github.com/FlagOpen/FlagPerf/blob/0078403cff4cff3120a75ffdeb6ae734bae09377/"
    "training/nvidia/resnet50-pytorch/README.md)"
)
_FLAGPERF_METHOD = (
    "DGX A100 (A100 40GB), 200 Gb/s InfiniBand between nodes, pytorch 1.8, batch 256 per GPU, "
    "p_core: ImageNet training without the data loading time"
)

REFERENCES = (
    Reference("resnet50", "A100", "mixed", 1, 1, 2470, _DLE, f"{_DLE_A100}, AMP (fp16), NHWC"),
    Reference("resnet50", "A100", "mixed", 8, 1, 16621, _DLE, f"{_DLE_A100}, AMP (fp16), NHWC"),
    Reference("resnet50", "A100", "fp32", 1, 1, 938, _DLE, f"{_DLE_A100}, TF32"),
    Reference("resnet50", "A100", "fp32", 8, 1, 7248, _DLE, f"{_DLE_A100}, TF32"),
    Reference("resnet50", "V100", "mixed", 1, 1, 1200, _DLE, f"{_DLE_V100}, AMP (fp16), batch 256 per GPU"),
    Reference("resnet50", "V100", "mixed", 8, 1, 8322, _DLE, f"{_DLE_V100}, AMP (fp16), batch 256 per GPU"),
    Reference("resnet50", "V100", "fp32", 1, 1, 367, _DLE, f"{_DLE_V100}, FP32, batch 112 per GPU"),
    Reference("resnet50", "V100", "fp32", 8, 1, 2855, _DLE, f"{_DLE_V100}, FP32, batch 112 per GPU"),
    Reference("resnet50", "A100", "fp32", 1, 1, 799, _FLAGPERF, f"{_FLAGPERF_METHOD}, fp32"),
    Reference("resnet50", "A100", "fp32", 8, 1, 6105, _FLAGPERF, f"{_FLAGPERF_METHOD}, fp32"),
    Reference("resnet50", "A100", "fp32", 16, 2, 11874, _FLAGPERF, f"{_FLAGPERF_METHOD}, fp32"),
)


def gpu_matches(reference_gpu: str, measured_gpu: str) -> bool:
    words = measured_gpu.upper().replace("-", " ").replace("_", " ").split()
    return reference_gpu.upper() in words


def for_run(model: str, measured_gpu: str | None, precision: str) -> list[Reference]:
    """The references for this model on this GPU type at this precision class (none on a CPU run)."""
    if not measured_gpu:
        return []
    wanted = PRECISION_CLASS[precision]
    return [
        r
        for r in REFERENCES
        if r.model == model and r.precision == wanted and gpu_matches(r.gpu, measured_gpu)
    ]
