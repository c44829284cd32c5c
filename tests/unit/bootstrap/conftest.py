"""What the bootstrap verb's unit tests share: a two-host inventory and a state dir of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov.ansible.arguments import Options


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Options:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\nnode2 ansible_host=192.0.2.11\n")
    return Options(inventory=inventory)
