"""Load a role's filter plugin file as a module, for unit tests of its pure functions; run a role's own tasks
on localhost."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from gpuprov import resources


def role_plugin(role: str, file: str) -> ModuleType:
    """roles/ROLE/filter_plugins/FILE, loaded as a module of its own (Ansible loads it by path too)."""
    path = resources.data_dir("roles") / role / "filter_plugins" / file
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_plays(plays: list[dict[str, Any]], where: Path, env: dict[str, str] | None = None) -> str:
    """ansible-playbook on localhost (connection local, this Python) over plays that hold a role's own
    tasks; its output. A failed run fails the test, with the output."""
    for play in plays:
        play.setdefault("hosts", "localhost")
        play.setdefault("gather_facts", False)
        play.setdefault("connection", "local")
        play["vars"] = {**play.get("vars", {}), "ansible_python_interpreter": sys.executable}
    (where / "play.yml").write_text(yaml.safe_dump(plays))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(where / "play.yml")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0", **(env or {})},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def role_task(role: str, file: str, name: str) -> dict[str, Any]:
    """The task of roles/ROLE/tasks/FILE with this name (inside blocks too)."""

    def walk(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [t for task in tasks for t in [task, *walk(task.get("block", []))]]

    tasks = yaml.safe_load((resources.data_dir("roles") / role / "tasks" / file).read_text())
    found = [t for t in walk(tasks) if t.get("name") == name]
    assert len(found) == 1, name
    return found[0]
