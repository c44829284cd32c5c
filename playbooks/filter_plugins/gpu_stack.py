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


def gpu_generation_conflicts(
    listing: str,
    stack: Any,
    generations: Mapping[str, Any],
    devices: Mapping[str, Any],
    table: Mapping[str, Any],
) -> list[str]:
    """The host's one line when its GPUs (read-pci-gpus.sh's output) cannot run the lock, else []; a lock
    that does not fit the table is the first play's to report."""
    found = _gpu_generation_check(listing, stack, generations, devices, table)
    return [found[0]] if found and found[0] else []


def gpu_generation_warnings(
    listing: str,
    stack: Any,
    generations: Mapping[str, Any],
    devices: Mapping[str, Any],
    table: Mapping[str, Any],
) -> list[str]:
    """One warning per GPU the table does not know (never a failure)."""
    found = _gpu_generation_check(listing, stack, generations, devices, table)
    return list(found[1]) if found else []


def _gpu_generation_check(
    listing: str,
    stack: Any,
    generations: Mapping[str, Any],
    devices: Mapping[str, Any],
    table: Mapping[str, Any],
) -> tuple[str | None, list[str]] | None:
    lock, gpus = _lock_module(), _gpuprov_module("gpu_generations")
    lock_fields = dict(stack) if isinstance(stack, Mapping) else stack
    if not isinstance(lock_fields, dict) or lock.check(lock_fields, table):
        return None
    cudas = [str(row["version"]) for row in table.get("cuda", [])]
    found: tuple[str | None, list[str]] = gpus.host_problems(
        gpus.parse_listing(listing), lock_fields, gpus.Tables(generations, devices), cudas
    )
    return found


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "gpu_stack_conflicts": gpu_stack_conflicts,
            "gpu_stack_os_conflicts": gpu_stack_os_conflicts,
            "gpu_generation_conflicts": gpu_generation_conflicts,
            "gpu_generation_warnings": gpu_generation_warnings,
        }
