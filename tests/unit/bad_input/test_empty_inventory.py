"""An empty or blank inventory path, on every verb that reads one and every way it can arrive: refused.

Path("") is "." to Python, and Ansible reads a directory as an inventory by running every executable file
in it as an inventory script: an empty path must never reach Ansible. The working directory of every case
here holds such a script, which would leave a marker file if it ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.errors import ExitCode
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error, real_gpuprov

EMPTY = "error: the inventory path is empty; give the path of an INI or YAML inventory"
BLANKS = ["", " ", "\t", "\n", " \t\n "]

# How each verb takes its inventory, and what else it needs to get as far as reading it.
VERBS = {
    "bootstrap": (["bootstrap"], []),
    "check": (["check"], []),
    "bench": (["bench"], []),
    "launch": (["launch"], ["train.py"]),
    "launch --dry-run": (["launch", "--dry-run"], ["train.py"]),
    "launch --detach": (["launch", "--detach"], ["train.py"]),
    "launch --emit-sbatch": (["launch", "--emit-sbatch", "job.sbatch"], ["train.py"]),
    "launch --scheduler slurm": (["launch", "--scheduler", "slurm", "--detach"], ["train.py"]),
}
POSITIONAL = ("bootstrap", "check", "bench")


@pytest.fixture
def trap(tmp_path: Path) -> Path:
    """A working directory with a training script and an executable that marks that it ran."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    script = tmp_path / "inventory_script.sh"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'RAN'}\necho '{{}}'\n")
    script.chmod(0o755)
    return tmp_path


def _ways(verb: str, blank: str) -> list[tuple[list[str], dict[str, str]]]:
    """Every way `blank` reaches `verb` as its inventory: arguments and environment."""
    ways = [(["-i", blank], {}), ([f"--inventory={blank}"], {})]
    if verb in POSITIONAL:
        ways.append(([blank], {}))
    if blank:  # an empty variable is an unset one (the next rule applies), a blank one is a path
        ways.append(([], {"GPUPROV_INVENTORY": blank}))
    return ways


@pytest.mark.parametrize("blank", BLANKS, ids=repr)
@pytest.mark.parametrize("verb", VERBS, ids=VERBS.keys())
def test_an_empty_inventory_path_is_refused_everywhere(verb: str, blank: str, trap: Path) -> None:
    before, after = VERBS[verb]
    for given, env in _ways(verb, blank):
        result = in_process.gpuprov(
            *before, *given, *after, cwd=trap, env={"GPUPROV_STATE_DIR": str(trap / "state"), **env}
        )
        assert one_error(result, ExitCode.BAD_INPUT) == EMPTY, (given, env)
        assert not (trap / "RAN").exists(), (given, env)
        assert not (trap / "state").exists() and not (trap / "job.sbatch").exists(), (given, env)


@pytest.mark.parametrize("verb", VERBS, ids=VERBS.keys())
def test_an_empty_variable_is_unset_and_runs_nothing(verb: str, trap: Path) -> None:
    before, after = VERBS[verb]
    result = in_process.gpuprov(
        *before, *after, cwd=trap, env={"GPUPROV_STATE_DIR": str(trap / "state"), "GPUPROV_INVENTORY": ""}
    )
    assert one_error(result, ExitCode.BAD_INPUT).startswith("error: no inventory found")
    assert not (trap / "RAN").exists()


@pytest.mark.parametrize("verb", ["bench", "launch --emit-sbatch"])
def test_the_real_command_runs_nothing_either(verb: str, trap: Path) -> None:
    before, after = VERBS[verb]
    proc = real_gpuprov(*before, "-i", "", *after, cwd=trap)
    assert one_error(proc, ExitCode.BAD_INPUT) == EMPTY
    assert not (trap / "RAN").exists()
