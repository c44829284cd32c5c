"""Run every Molecule scenario under molecule/ (each directory with a molecule.yml): `molecule test -s NAME`.

The scenarios start their own gpuprov sandbox (molecule/shared/create.yml) and test roles on its nodes
against the sandbox mirror: a --check run on fresh hosts, converge, idempotence (changed=0), verify.
Scenarios other issues add are picked up without editing this file. With GPUPROV_STRATEGY=mitogen in the
environment the scenarios' plays run through Mitogen's strategy, as `gpuprov bootstrap --strategy mitogen`
would run them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov.ansible import arguments

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))

pytestmark = pytest.mark.integration


def test_scenarios_are_found():
    assert "nvidia_stack" in SCENARIOS


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario: str, tmp_path: Path):
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        # The scenario's sandbox keeps its files here, away from the user's sandboxes.
        "GPUPROV_STATE_DIR": str(tmp_path / "gpuprov-state"),
        "ANSIBLE_NOCOLOR": "1",
        "NO_COLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        # As in gpuprov's runs: roles read facts as ansible_facts['...'], never the injected names.
        "ANSIBLE_INJECT_FACT_VARS": "False",
        **arguments.strategy_envvars(os.environ.get("GPUPROV_STRATEGY", "linear")),
    }
    proc = subprocess.run(
        [str(BIN / "molecule"), "test", "-s", scenario],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    log = proc.stdout + proc.stderr
    (tmp_path / "molecule.log").write_text(log)
    assert proc.returncode == 0, f"molecule test -s {scenario} failed:\n{log[-8000:]}"
    sequence = [
        line.split(">", 1)[1].split("]", 1)[0].strip()
        for line in log.splitlines()
        if f"[{scenario} >" in line and "Executed: Successful" in line
    ]
    for step in ("create", "converge", "idempotence", "verify", "destroy"):
        assert step in sequence, f"step {step} did not succeed: {sequence}"
