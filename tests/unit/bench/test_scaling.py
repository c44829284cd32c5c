"""Speedup, efficiency and cross-node factor against values worked out by hand."""

from __future__ import annotations

import pytest

from gpuprov.bench.scaling import Rung, cross_node_factor, scale, spread

# The guides' ResNet-50 ladder: 450 img/s on 1 GPU, 1700 on 4 GPUs of a node, 3400 on 8 GPUs over 2 nodes.
LADDER = [
    Rung("1 GPU", 1, 1, 450.0, 440.0, 460.0),
    Rung("1 node (4 GPUs)", 1, 4, 1700.0, 1690.0, 1717.0),
    Rung("2 nodes", 2, 8, 3400.0, 3332.0, 3400.0),
]


def test_speedup_is_over_the_one_process_run() -> None:
    rows = scale(LADDER)
    # 1700 / 450 = 3.777..., 3400 / 450 = 7.555...
    assert [r.speedup for r in rows] == pytest.approx([1.0, 3.7777778, 7.5555556])


def test_efficiency_is_speedup_per_process() -> None:
    rows = scale(LADDER)
    # 3.7778 / 4 = 0.94444, 7.5556 / 8 = 0.94444
    assert [r.efficiency for r in rows] == pytest.approx([1.0, 0.9444444, 0.9444444])


def test_cross_node_factor_compares_two_nodes_with_the_whole_first_node() -> None:
    assert cross_node_factor(LADDER) == pytest.approx(2.0)  # 3400 / 1700, not 3400 / 450


def test_on_cpu_the_one_process_run_is_the_whole_node() -> None:
    ladder = [Rung("1 process (CPU)", 1, 1, 6.0, 5.0, 7.0), Rung("2 nodes", 2, 2, 9.0, 8.0, 9.5)]
    rows = scale(ladder)
    assert rows[1].speedup == pytest.approx(1.5)
    assert rows[1].efficiency == pytest.approx(0.75)
    assert cross_node_factor(ladder) == pytest.approx(1.5)


def test_without_a_one_process_run_nothing_is_made_up() -> None:
    rows = scale([Rung("2 nodes", 2, 16, 1000.0, 990.0, 1010.0)])
    assert rows[0].speedup is None and rows[0].efficiency is None
    assert cross_node_factor([Rung("1 node", 1, 8, 1.0, 1.0, 1.0)]) is None


def test_spread_is_the_windows_range_over_the_median() -> None:
    assert spread(LADDER[0]) == pytest.approx(20.0 / 450.0)
    assert spread(LADDER[2]) == pytest.approx(68.0 / 3400.0)
