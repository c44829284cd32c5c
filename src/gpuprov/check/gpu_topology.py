"""Which GPU pairs NVLink joins, from `nvidia-smi topo -m`: the all-GPU all-reduce's bottleneck on one host.

The matrix has one row per GPU (then NICs); each cell says how two devices connect: `X` itself, `NV#` a bonded
set of # NVLinks, else a PCIe path (`PIX`, `PXB`, `PHB`, `NODE`, `SYS`: the legend nvidia-smi prints).
Users paste it tab-separated (as nvidia-smi writes it) or with the tabs turned to spaces; the header may
start with a terminal underline escape (tests/recorded/nvidia-smi/topo-m-*).

- every GPU pair `NV#` (NVSwitch systems: HGX/DGX A100, H100, H200, B200 show `NV12`/`NV18` everywhere):
  the all-reduce stays on NVLink, and NVLink's figures apply;
- some pairs only (NVLink bridges between PCIe cards: A100 PCIe `NV12` pairs, NVIDIA/nccl-tests#178; or a
  cube-mesh): an all-GPU all-reduce crosses PCIe or takes a ring of NVLinks no published figure covers;
- none: PCIe only.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"GPU(\d+)$")
_NVLINK = re.compile(r"NV(\d+)$")


class Joined(enum.StrEnum):
    ALL_PAIRS = "NVLink between every GPU pair"
    SOME_PAIRS = "NVLink between some GPU pairs only"
    NONE = "PCIe only, no NVLink"
    ONE_GPU = "one GPU"


@dataclass(frozen=True)
class Topology:
    cells: tuple[tuple[str, ...], ...]  # [i][j]: how GPU i reaches GPU j, as the matrix prints it

    @property
    def gpus(self) -> int:
        return len(self.cells)

    def nvlinks(self, i: int, j: int) -> int:
        """The NVLinks bonded between GPUs i and j; 0 where their path is PCIe."""
        match = _NVLINK.match(self.cells[i][j])
        return int(match.group(1)) if match else 0

    def pair_links(self) -> list[int]:
        return [self.nvlinks(i, j) for i in range(self.gpus) for j in range(self.gpus) if i != j]

    def joined(self) -> Joined:
        links = self.pair_links()
        if not links:
            return Joined.ONE_GPU
        if all(links):
            return Joined.ALL_PAIRS
        return Joined.SOME_PAIRS if any(links) else Joined.NONE

    def summary(self) -> str:
        """In a few words, as the check shows it: `8 GPUs, NV18 between every pair`."""
        kind = self.joined()
        if kind is Joined.ALL_PAIRS:
            counts = sorted(set(self.pair_links()))
            shown = f"NV{counts[0]}" if len(counts) == 1 else f"NV{counts[0]}-NV{counts[-1]}"
            return f"{self.gpus} GPUs, {shown} between every pair"
        if kind is Joined.SOME_PAIRS:
            joined = sum(1 for n in self.pair_links() if n) // 2
            pairs = self.gpus * (self.gpus - 1) // 2
            return f"{self.gpus} GPUs, NVLink between {joined} of {pairs} pairs, PCIe between the others"
        return "1 GPU" if kind is Joined.ONE_GPU else f"{self.gpus} GPUs, {kind.value}"


def parse(text: str) -> Topology | None:
    """The GPU-to-GPU part of `nvidia-smi topo -m`; None when the text holds no GPU matrix."""
    lines = [_ESCAPE.sub("", line).split() for line in text.splitlines()]
    start = next((n for n, fields in enumerate(lines) if fields[:1] == ["GPU0"]), None)
    if start is None:
        return None
    columns = [int(m.group(1)) for m in map(_GPU.match, lines[start]) if m]
    rows: dict[int, tuple[str, ...]] = {}
    for fields in lines[start + 1 :]:
        match = _GPU.match(fields[0]) if fields else None
        if match and len(fields) > len(columns):
            rows[int(match.group(1))] = tuple(fields[1 : len(columns) + 1])
    if sorted(rows) != columns or columns != list(range(len(columns))):
        return None
    return Topology(tuple(rows[i] for i in columns))
