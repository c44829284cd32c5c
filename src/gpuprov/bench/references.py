"""Published throughput figures shown beside measured rows of the same model and GPU type.

Each row keeps its source and method: published numbers vary by 1.5x on method alone, so a figure without
its method says little. Only figures whose source was read are here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    model: str
    gpu: str  # matched as a word in the measured GPU's name ("A100" in "NVIDIA A100-SXM4-80GB")
    gpus: int
    nodes: int
    img_s: float
    source: str
    method: str


_DLE = (
    "NVIDIA Deep Learning Examples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "
    "'Training performance: NVIDIA DGX A100 (8x A100 80GB)'"
)
_DLE_METHOD = "A100 80GB, mixed precision (AMP), batch 256 per GPU, DALI, pytorch-21.03 NGC container"
_GUIDES = "the guides gpuprov grew from (quoted in gpuprov issue 14)"
_GUIDES_METHOD = "method not stated by the guides"

REFERENCES = (
    Reference("resnet50", "A100", 1, 1, 2470, _DLE, _DLE_METHOD),
    Reference("resnet50", "A100", 8, 1, 16621, _DLE, _DLE_METHOD),
    Reference("resnet50", "A100", 1, 1, 450, _GUIDES, _GUIDES_METHOD),
    Reference("resnet50", "A100", 4, 1, 1700, _GUIDES, _GUIDES_METHOD),
    Reference("resnet50", "A100", 8, 2, 3400, _GUIDES, _GUIDES_METHOD),
    Reference("vit_b_16", "A100", 1, 1, 320, _GUIDES, _GUIDES_METHOD),
    Reference("vit_b_16", "A100", 4, 1, 1200, _GUIDES, _GUIDES_METHOD),
    Reference("vit_b_16", "A100", 8, 2, 2400, _GUIDES, _GUIDES_METHOD),
)


def gpu_matches(reference_gpu: str, measured_gpu: str) -> bool:
    words = measured_gpu.upper().replace("-", " ").replace("_", " ").split()
    return reference_gpu.upper() in words


def for_run(model: str, measured_gpu: str | None) -> list[Reference]:
    """The references for this model on this GPU type (none on a CPU run)."""
    if not measured_gpu:
        return []
    return [r for r in REFERENCES if r.model == model and gpu_matches(r.gpu, measured_gpu)]
