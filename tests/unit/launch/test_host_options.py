"""--nodes / --hosts: one definition (gpuprov/host_options.py) that launch and bench both take."""

from __future__ import annotations

import click
import pytest

from gpuprov import host_options
from gpuprov.bench.command import bench
from gpuprov.errors import BadInput
from gpuprov.launch.commands import launch


def _params(command: click.Command) -> dict[str, tuple[str | None, str | None, list[str]]]:
    return {
        p.name: (p.help if isinstance(p, click.Option) else None, str(p.type), p.opts)
        for p in command.params
        if p.name in ("nodes", "hosts")
    }


def test_launch_and_bench_take_the_same_host_options() -> None:
    assert _params(launch) == _params(bench)
    assert sorted(_params(launch)) == ["hosts", "nodes"]


@pytest.mark.parametrize(
    ("nodes", "hosts", "message"),
    [
        (2, "node1", "--nodes and --hosts exclude each other"),
        (0, None, "--nodes 0 is not valid: give 1 or more"),
        (None, " , ", "--hosts is empty"),
        (None, "a,b,a", "--hosts names a more than once"),
    ],
)
def test_bad_selection_is_one_line(nodes: int | None, hosts: str | None, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        host_options.check(nodes, hosts)


def test_good_selection() -> None:
    assert host_options.check(None, " node2, node1 ") == (None, ("node2", "node1"))
    assert host_options.check(3, None) == (3, ())
