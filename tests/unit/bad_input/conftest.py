"""What the bad-input tests share: a working directory whose two hosts refuse every connection."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A directory with a training script and an inventory of two hosts, 127.0.0.1 on closed ports (1, 2):
    every SSH connection is refused at once. node1 names a master address, as launch's tests need."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\n"
        "node1 ansible_host=127.0.0.1 ansible_port=1 gpuprov_master_addr=192.0.2.1\n"
        "node2 ansible_host=127.0.0.1 ansible_port=2\n"
    )
    return tmp_path
