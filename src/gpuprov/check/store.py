"""A check run's results, kept in the state dir like bootstrap's runs: <state dir>/checks/<run id>/.

results.json holds every result and the run's exit code; the 20 newest runs are kept.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from gpuprov import console, paths
from gpuprov.ansible import runs

RESULTS = "results.json"


def checks_dir() -> Path:
    return paths.state_dir() / "checks"


def check_room() -> None:
    """The state dir takes check's results (a few kB); EnvironmentProblem (exit 3) before any host if not."""
    paths.writable_state_dir("check", need_mb=1)


def save(summary: dict[str, Any]) -> Path | None:
    """The results' directory; None, with a warning and nothing half-written left, when they cannot be
    written (the disk filled during the run): the results are still shown and the exit code stands."""
    root = checks_dir()
    run_id = runs.new_run_id()
    path = root / run_id
    try:
        with runs.private_files():
            path.mkdir(parents=True, exist_ok=False)
            tmp = path / f"{RESULTS}.tmp"  # renamed whole: bench never reads half a file
            tmp.write_text(json.dumps(summary, indent=2) + "\n")
            os.replace(tmp, path / RESULTS)
    except OSError as exc:
        shutil.rmtree(path, ignore_errors=True)
        console.warning(
            f"the results were not saved: cannot write {path}: {exc.strerror or exc}; free some room in "
            f"the state dir {paths.state_dir()} (bench will not find this run's bus bandwidth)"
        )
        return None
    runs.rotate(root, keep=runs.KEEP_RUNS, current=run_id)
    return path
