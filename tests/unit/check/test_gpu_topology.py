"""`nvidia-smi topo -m` read from recorded real outputs (tests/recorded/nvidia-smi/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.check import gpu_topology
from gpuprov.check.gpu_topology import Joined

SMI = Path(__file__).parents[2] / "recorded" / "nvidia-smi"


@pytest.mark.parametrize(
    ("recording", "gpus", "joined"),
    [
        ("topo-m-8xNV18-9NIC", 8, Joined.ALL_PAIRS),  # tabs, NIC rows below the GPUs
        ("topo-m-8xA100PCIe-NV12-pairs", 8, Joined.SOME_PAIRS),  # tabs turned to spaces in the paste
        ("topo-m-8xRTX4090-PCIe", 8, Joined.NONE),  # with the legend and the NIC legend
        ("topo-m-1xH100-580.159.04", 1, Joined.ONE_GPU),  # a terminal's underline escape on the header
    ],
)
def test_recorded_matrices(recording: str, gpus: int, joined: Joined) -> None:
    topo = gpu_topology.parse((SMI / recording).read_text())
    assert topo is not None and (topo.gpus, topo.joined()) == (gpus, joined)


def test_links_between_pairs() -> None:
    pairs = gpu_topology.parse((SMI / "topo-m-8xA100PCIe-NV12-pairs").read_text())
    assert pairs is not None
    assert (pairs.nvlinks(0, 1), pairs.nvlinks(0, 2), pairs.nvlinks(7, 6)) == (12, 0, 12)
    full = gpu_topology.parse((SMI / "topo-m-8xNV18-9NIC").read_text())
    assert full is not None and set(full.pair_links()) == {18}
    assert full.summary() == "8 GPUs, NV18 between every pair"


@pytest.mark.parametrize("text", ["", "No devices were found\n", "\tGPU0\tGPU1\nGPU0\t X \tNV4\n"])
def test_no_matrix(text: str) -> None:
    assert gpu_topology.parse(text) is None  # nothing, an error, or a row missing
