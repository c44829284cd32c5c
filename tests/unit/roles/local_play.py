"""Run a role's tasks on this machine with real ansible-playbook (`-c local`), their inputs given as extra
variables, so a test can check what the tasks decide without a host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gpuprov import resources

BIN = Path(sys.executable).parent
ROLES = resources.data_dir("roles")


def role_task(role: str, tasks_file: str, name_prefix: str) -> dict[str, Any]:
    """The one task of roles/ROLE/tasks/TASKS_FILE whose name starts with NAME_PREFIX."""
    tasks = yaml.safe_load((ROLES / role / "tasks" / tasks_file).read_text())
    return next(t for t in tasks if t["name"].startswith(name_prefix))


def run_play(
    tmp_path: Path,
    tasks: list[dict[str, Any]],
    extra: dict[str, Any],
    *,
    play_vars: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook on localhost with TASKS as the play's tasks; the play and extra variables as YAML
    and JSON, never hand-quoted. Roles resolve from gpuprov's roles directory."""
    play: dict[str, Any] = {"hosts": "localhost", "gather_facts": False, "tasks": tasks}
    if play_vars:
        play["vars"] = play_vars
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    # A task file of a role that depends on nvidia_repository runs that dependency when included; the tests
    # check the task file itself, on a machine with no NVIDIA repository, so they say it is already set up.
    variables = {"ansible_python_interpreter": sys.executable, "nvidia_repository_pending": False, **extra}
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook),
         "-e", json.dumps(variables)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1", **(env or {})},
    )  # fmt: skip
