"""A check run's results, kept in the state dir like bootstrap's runs: <state dir>/checks/<run id>/.

results.json holds every result and the run's exit code; the 20 newest runs are kept.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gpuprov import paths
from gpuprov.ansible import runs

RESULTS = "results.json"


def checks_dir() -> Path:
    return paths.state_dir() / "checks"


def check_room() -> None:
    """The state dir takes check's results (a few kB); EnvironmentProblem (exit 3) before any host if not."""
    paths.writable_state_dir("check", need_mb=1)


def save(summary: dict[str, Any]) -> Path:
    root = checks_dir()
    run_id = runs.new_run_id()
    path = root / run_id
    path.mkdir(parents=True, exist_ok=False)
    os.chmod(path, 0o700)
    target = path / RESULTS
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, target)
    runs.rotate(root, keep=runs.KEEP_RUNS, current=run_id)
    return path
