"""The filter plugin of playbooks/validate_inventory_and_lock.yml calls gpuprov.lock: the same messages as
`gpuprov bootstrap`."""

from __future__ import annotations

import importlib.util

from gpuprov import lock, resources
from gpuprov.sandbox.inventory import SANDBOX_LOCK

PLUGIN = resources.data_dir("playbooks") / "filter_plugins" / "gpu_stack.py"


def _filters() -> dict:
    spec = importlib.util.spec_from_file_location("gpu_stack_filter", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()


def test_os_filter_takes_ansible_facts_and_says_what_lock_py_says():
    os_conflicts = _filters()["gpu_stack_os_conflicts"]
    table = lock.load_table()
    # Ansible's facts: distribution "Ubuntu", distribution_version "24.04"; Debian "12.7"; Rocky "9.4".
    assert os_conflicts(SANDBOX_LOCK, "Ubuntu", "24.04", table) == lock.os_problems(
        SANDBOX_LOCK, "ubuntu", "24.04"
    )
    assert os_conflicts(SANDBOX_LOCK, "Ubuntu", "24.04", table)[0].startswith(
        "NVIDIA's ubuntu2404 repository has no CUDA 12.4.1"
    )
    assert os_conflicts(SANDBOX_LOCK, "Debian", "12.7", table) == []
    assert os_conflicts(SANDBOX_LOCK, "Rocky", "9.4", table) == []
