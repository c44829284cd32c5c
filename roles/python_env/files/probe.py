"""Print what a Python environment holds, as JSON (python_env role); run with the environment's python."""

import json
import os
import platform
import sys

info = {
    "python": os.path.join(sys.prefix, "bin", "python"),
    "python_version": platform.python_version(),
    "torch_version": None,
    "torch_cuda": None,
    "nccl_version": None,
    "torch_computes": None,
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
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_nccl_available():
            version = torch.cuda.nccl.version()
            info["nccl_version"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    except Exception:  # a build whose NCCL cannot be asked: recorded as none
        pass
json.dump(info, sys.stdout)
