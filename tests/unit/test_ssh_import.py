"""paramiko is imported without invoke (only `Match exec` of an ssh_config needs it; gpuprov reads none)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from gpuprov import ssh
ssh.import_paramiko()
import paramiko.config
print("invoke loaded:", "invoke" in sys.modules, "paramiko's invoke:", paramiko.config.invoke)
import invoke
print("importable after:", invoke.__name__)
"""


def test_paramiko_loads_without_invoke_and_invoke_stays_importable() -> None:
    pytest.importorskip("invoke")  # paramiko's dependency; without it there is nothing to hide
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert "invoke loaded: False paramiko's invoke: None" in out
    assert "importable after: invoke" in out
