"""The lock check for playbooks/site.yml: the same code `gpuprov bootstrap` runs (gpuprov.lock, and
gpuprov.gpu_generations for each host's GPUs)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _lock_module() -> Any:
    return _gpuprov_module("lock")


def _gpuprov_module(name: str) -> Any:
    try:
        return importlib.import_module(f"gpuprov.{name}")
    except ImportError:  # a source checkout used with plain ansible-playbook, gpuprov not installed
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
        return importlib.import_module(f"gpuprov.{name}")


def gpu_stack_conflicts(locks: Mapping[str, Any], table: Mapping[str, Any]) -> list[str]:
    """One message per conflict, for a mapping host -> that host's `gpu_stack` (None when unset).

    Hosts with the same lock are checked once and named together.
    """
    lock = _lock_module()
    groups: list[tuple[Any, list[str]]] = []
    for host, stack in locks.items():
        for known, hosts in groups:
            if known == stack:
                hosts.append(host)
                break
        else:
            groups.append((stack, [host]))
    messages = []
    for stack, hosts in groups:
        where = ", ".join(hosts) if len(hosts) <= 5 else f"{', '.join(hosts[:5])} and {len(hosts) - 5} more"
        if stack is None:
            sample = "inventory/sample/group_vars/all/gpu_stack.yml"
            messages.append(f"{where}: gpu_stack is not set; copy {sample} into your inventory")
            continue
        problems = lock.check(dict(stack) if isinstance(stack, Mapping) else stack, table)
        messages += [f"{where}: {problem}" for problem in problems]
    return messages


def gpu_stack_os_conflicts(
    stack: Any, distribution: str, version: str, table: Mapping[str, Any]
) -> list[str]:
    """One message when NVIDIA's repository for this OS (Ansible's distribution, version) lacks the CUDA."""
    lock = _lock_module()
    return list(
        lock.os_problems(dict(stack) if isinstance(stack, Mapping) else stack, distribution, version, table)
    )


def gpu_generation_problems(
    listing: str,
    stack: Any,
    generations: Mapping[str, Any],
    devices: Mapping[str, Any],
    table: Mapping[str, Any],
) -> dict[str, list[str]]:
    """{"conflicts": the host's one line when its GPUs (read-pci-gpus.sh's output) cannot run the lock,
    "warnings": one per GPU the table does not know}; a lock that does not fit the table is left to the
    first play."""
    lock, gpus = _lock_module(), _gpuprov_module("gpu_generations")
    lock_fields = dict(stack) if isinstance(stack, Mapping) else stack
    if not isinstance(lock_fields, dict) or lock.check(lock_fields, table):
        return {"conflicts": [], "warnings": []}
    cudas = [str(row["version"]) for row in table.get("cuda", [])]
    line, warnings = gpus.host_problems(
        gpus.parse_listing(listing), lock_fields, gpus.Tables(generations, devices), cudas
    )
    return {"conflicts": [line] if line else [], "warnings": list(warnings)}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "gpu_stack_conflicts": gpu_stack_conflicts,
            "gpu_stack_os_conflicts": gpu_stack_os_conflicts,
            "gpu_generation_problems": gpu_generation_problems,
        }
