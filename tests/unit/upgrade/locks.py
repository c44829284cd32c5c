"""Two locks the sandbox mirror serves both of (sandbox/standins/catalogue.py): A, the R550 stack the sample
lock had before it moved to R580, and B, what `gpuprov lock resolve` chose there then (docs/lock.md)."""

from __future__ import annotations

from typing import Any

LOCK_A: dict[str, Any] = {
    "driver_branch": "550",
    "driver_version": "550.127.08",
    "driver_flavor": "open",
    "cuda_version": "12.4.1",
    "cudnn_version": "9.5.1.17",
    "nccl_version": "2.21.5",
    "pytorch_version": "2.13.0",
    "pytorch_cuda_tag": "cpu",
}
LOCK_B: dict[str, Any] = {
    **LOCK_A,
    "driver_branch": "570",
    "driver_version": "570.124.06",
    "cuda_version": "12.6.3",
    "nccl_version": "2.23.4",
}
# What the roles publish on a host at lock A (tests/local/roles/test_verified_versions.py's recorded forms).
VERIFIED_A = {
    "driver": "550.127.08",
    "cuda": "12.4.1",
    "cudnn": "9.5.1.17",
    "nccl": "2.21.5+cuda12.4",
    "python": "3.11.2",
    "pytorch": "2.13.0+cpu",
}
VERIFIED_B = {**VERIFIED_A, "driver": "570.124.06", "cuda": "12.6.3", "nccl": "2.23.4+cuda12.6"}
