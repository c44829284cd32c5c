"""Locks the tests share: each fits gpuprov's compatibility table (playbooks/vars/gpu_stack_compat.yml)."""

from __future__ import annotations

# CUDA 13 on R580, the open modules, PyTorch's cu130 wheels: what a V100 cannot run (docs/gpu-generations.md).
CUDA13 = {
    "driver_branch": "580",
    "driver_version": "580.95.05",
    "driver_flavor": "open",
    "cuda_version": "13.0.2",
    "cudnn_version": "9.15.0.58",
    "nccl_version": "2.28.9",
    "pytorch_version": "2.10.0",
    "pytorch_cuda_tag": "cu130",
}
