"""The `horovod_check_build` filter: what `horovodrun --check-build` says a Horovod build contains.

Horovod 0.28.1 prints (horovod/runner/launch.py, check_build):

    Horovod v0.28.1:

    Available Frameworks:
        [ ] TensorFlow
        [X] PyTorch
        ...
    Available Controllers:
        [X] MPI
        [X] Gloo

    Available Tensor Operations:
        [ ] NCCL
        ...

python_env compares the parsed build with the one it wants, to rebuild only when they differ.
"""

from __future__ import annotations

import re
from typing import Any

_VERSION = re.compile(r"^\s*Horovod v(\S+):\s*$", re.MULTILINE)
_SECTION = re.compile(r"^\s*Available (Frameworks|Controllers|Tensor Operations):\s*$", re.MULTILINE)
_CHECKED = re.compile(r"^\s*\[X\] (\S+)\s*$", re.MULTILINE)
_KEYS = {"Frameworks": "frameworks", "Controllers": "controllers", "Tensor Operations": "operations"}


def horovod_check_build(stdout: Any) -> dict[str, Any]:
    """{"version": "0.28.1", "frameworks": [...], "controllers": [...], "operations": [...]}, lists sorted;
    version "" and empty lists when the text is not check-build's output (no Horovod, an import error)."""
    text = str(stdout or "")
    parsed: dict[str, Any] = {"version": "", "frameworks": [], "controllers": [], "operations": []}
    version = _VERSION.search(text)
    if version is None:
        return parsed
    parsed["version"] = version.group(1)
    headers = list(_SECTION.finditer(text))
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        body = text[header.end() : following.start() if following else len(text)]
        parsed[_KEYS[header.group(1)]] = sorted(_CHECKED.findall(body))
    return parsed


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"horovod_check_build": horovod_check_build}
