"""The GPU generation filters of playbooks/validate_inventory_and_lock.yml call gpuprov.gpu_generations: the
same line as `gpuprov bootstrap`'s preflight, from the same sysfs listing."""

from __future__ import annotations

import importlib.util
from typing import Any

from gpuprov import gpu_generations, lock, resources
from gpuprov.gpu_generations import PciGpu
from tests.locks import CUDA13

PLUGIN = resources.data_dir("playbooks") / "filter_plugins" / "gpu_stack.py"
LISTING = (
    "0000:18:00.0 0x10de 0x1db1 0x030200\n"
    "0000:18:00.1 0x10de 0x10f2 0x040300\n"  # the V100's audio function: not a GPU
    "0000:28:00.0 0x10de 0xfffe 0x030200\n"
)


def _filters() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("gpu_stack_filter", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: dict[str, Any] = module.FilterModule().filters()
    return found


def test_the_filters_say_what_the_preflight_says() -> None:
    tables = gpu_generations.load_tables()
    table = lock.load_table()
    args = (CUDA13, tables.generations, tables.devices, table)
    line, warnings = gpu_generations.host_problems(
        [PciGpu("0000:18:00.0", "1db1"), PciGpu("0000:28:00.0", "fffe")],
        CUDA13,
        tables,
        [str(r["version"]) for r in table["cuda"]],
    )
    assert line is not None and line.startswith("1x Tesla V100 SXM2 16GB (Volta, 10de:1db1): ")
    assert _filters()["gpu_generation_problems"](LISTING, *args) == {
        "conflicts": [line],
        "warnings": warnings,
    }
    assert len(warnings) == 1


def test_no_gpus_or_a_lock_that_does_not_fit_the_table_give_nothing_here() -> None:
    tables = gpu_generations.load_tables()
    table = lock.load_table()
    problems = _filters()["gpu_generation_problems"]
    nothing = {"conflicts": [], "warnings": []}
    assert problems("", CUDA13, tables.generations, tables.devices, table) == nothing
    bad = {**CUDA13, "cuda_version": "13.9.9"}  # the first play reports it
    assert problems(LISTING, bad, tables.generations, tables.devices, table) == nothing
