"""Print what a Python environment holds, as JSON (python_env role); run with the environment's python."""

import json
import os
import platform
import sys
import warnings

info = {
    "python": os.path.join(sys.prefix, "bin", "python"),
    "python_version": platform.python_version(),
    "torch_version": None,
    "torch_cuda": None,
    "nccl_version": None,
    "torch_computes": None,
    "cuda_device_count": None,
    "cuda_ops": None,
    "cuda_warnings": None,
}
try:
    import torch
except ImportError:
    pass
else:
    info["torch_version"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    # A tiny matmul: an import that works but cannot compute (a broken BLAS, a wrong CPU build) shows here.
    x = torch.arange(6.0).reshape(2, 3)
    info["torch_computes"] = int((x @ x.T).sum().item()) == 83
    # CUDA itself, on every GPU: nvidia-smi can list GPUs that CUDA cannot start. On an NVSwitch system
    # without fabric manager torch only warns "CUDA initialization: ... Error 802: system not yet
    # initialized" and counts 0 devices (microsoft/lisa issue 2823), so the count and the warning are kept
    # for the role to compare with nvidia-smi's, and each device runs a matmul: true, or the error.
    if torch.version.cuda is not None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            info["cuda_device_count"] = torch.cuda.device_count()
        info["cuda_warnings"] = [str(w.message)[:300] for w in caught]
        ops = []
        for index in range(info["cuda_device_count"]):
            try:
                y = torch.arange(6.0, device=f"cuda:{index}").reshape(2, 3)
                ops.append(int((y @ y.T).sum().item()) == 83)
            except Exception as error:  # reported, not raised
                ops.append(f"{type(error).__name__}: {error}"[:300])
        info["cuda_ops"] = ops
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_nccl_available():
            version = torch.cuda.nccl.version()
            info["nccl_version"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    except Exception:  # a build whose NCCL cannot be asked: recorded as none
        pass
json.dump(info, sys.stdout)
