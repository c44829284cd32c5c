"""Run a role's tasks on this machine with real ansible-playbook (`-c local`), so a test can check what the
tasks decide without a host: run_play once per case, its inputs given as extra variables; run_cases for many
cases in one run, each a local host of its own with its inputs as host variables."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class CaseResult:
    """One case of run_cases: did its host fail, and the default callback's lines about that host."""

    failed: bool
    output: str


_RESULT_LINE = re.compile(r"^(?:ok|changed|skipping|fatal|failed): \[([^\]]+)\]")  # the default callback's
_RECAP_LINE = re.compile(r"^(\S+)\s+: ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)")


def run_cases(
    tmp_path: Path,
    tasks: list[dict[str, Any]],
    cases: dict[str, dict[str, Any]],
    *,
    paths: dict[str, str] | None = None,
    play_vars: dict[str, Any] | None = None,
) -> dict[str, CaseResult]:
    """TASKS for several cases in one ansible-playbook run: each case is a host of its own (a local
    connection) whose host variables are the case's inputs, so one Ansible start serves them all and each
    fails or passes alone. paths: a case's PATH (e.g. a fake tool first), given as the play's environment.
    play_vars: what every case shares, as the play's variables (they rank above host variables: a case's
    inputs must not be among them).

    Host variables rank below a role's vars/ and its set_fact, where run_play's extra variables rank above
    everything: use it for tasks whose inputs no role file or earlier task sets."""
    inventory = {
        "all": {
            "hosts": {
                name: {
                    **inputs,
                    "ansible_connection": "local",
                    "gpuprov_test_path": (paths or {}).get(name, os.environ["PATH"]),
                }
                for name, inputs in cases.items()
            }
        }
    }
    (tmp_path / "cases.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    play: dict[str, Any] = {
        "hosts": "all",
        "gather_facts": False,
        "environment": {"PATH": "{{ gpuprov_test_path }}"},
        "tasks": tasks,
    }
    if play_vars:
        assert not {name for inputs in cases.values() for name in inputs} & set(play_vars)
        play["vars"] = play_vars
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False))
    variables = {"ansible_python_interpreter": sys.executable, "nvidia_repository_pending": False}
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(tmp_path / "cases.yml"), str(playbook),
         "-e", json.dumps(variables)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    lines: dict[str, list[str]] = {name: [] for name in cases}
    failed: dict[str, bool] = {}
    host = None
    for line in proc.stdout.splitlines():
        recap = _RECAP_LINE.match(line)
        if recap and recap[1] in cases:
            failed[recap[1]] = int(recap[2]) + int(recap[3]) > 0
            continue
        started = _RESULT_LINE.match(line)
        if started:
            host = started[1] if started[1] in cases else None
        elif not line.strip() or line.startswith(("TASK [", "PLAY [", "PLAY RECAP", "[")):
            host = None  # [ERROR] / [WARNING]: may name another host; its own result line repeats the msg
        if host is not None:
            lines[host].append(line)
    assert set(failed) == set(cases), proc.stdout[-3000:] + proc.stderr[-3000:]
    return {name: CaseResult(failed[name], "\n".join(lines[name])) for name in cases}
