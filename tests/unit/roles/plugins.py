"""Load a role's filter plugin file as a module, for unit tests of its pure functions."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from gpuprov import resources


def role_plugin(role: str, file: str) -> ModuleType:
    """roles/ROLE/filter_plugins/FILE, loaded as a module of its own (Ansible loads it by path too)."""
    path = resources.data_dir("roles") / role / "filter_plugins" / file
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
