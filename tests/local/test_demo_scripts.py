"""scripts/demo.sh and scripts/setup.sh refuse a wrong argument before they change anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        (
            "demo.sh",
            ["--nodes", "3"],
            "demo.sh: unknown argument '--nodes'; usage: scripts/demo.sh [--name NAME]",
        ),
        ("demo.sh", ["--name"], "demo.sh: --name needs a value"),
        ("setup.sh", ["--tests"], "setup.sh: unknown argument '--tests'; usage: scripts/setup.sh [--demo]"),
    ],
)
def test_a_wrong_argument_is_one_line_and_exit_2(script: str, args: list[str], message: str) -> None:
    done = run(script, *args)

    assert done.returncode == 2
    assert done.stderr == message + "\n"
    assert done.stdout == ""
