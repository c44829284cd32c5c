"""What `gpuprov check` runs in the env's python on each host: its versions after a real `import torch`.

Prints one JSON object: python, torch, torch_cuda, cuda_available, device_count, torch_nccl (or error, when
torch cannot be imported or initialised). Standard library apart from torch; any Python 3 from 3.6 on (an
env not yet known good: see gpuprov.onhost). hostprobe.py runs it as `python -c <this file's text>` (the
text comes with its request).
"""

import json
import sys
from typing import Any, Dict, Optional


def nccl_version(torch: Any) -> Optional[str]:
    """torch's NCCL version as 'X.Y.Z' (None without CUDA, or when torch cannot say)."""
    if not torch.version.cuda:
        return None
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return None
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def probe() -> Dict[str, object]:
    info: Dict[str, object] = {"python": ".".join(map(str, sys.version_info[:3]))}
    try:
        import torch  # type: ignore[import-not-found]  # the env's, on the host

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        info["cuda_available"] = bool(torch.cuda.is_available())
        info["device_count"] = torch.cuda.device_count() if torch.version.cuda else 0
        info["torch_nccl"] = nccl_version(torch)
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
    return info


if __name__ == "__main__":
    print(json.dumps(probe()))
