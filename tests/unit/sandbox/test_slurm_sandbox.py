"""`gpuprov sandbox up --slurm`: its inventory, the OSes it accepts, and the debian12 nodes' apt source for
the mirror's copy of Debian's Slurm packages."""

import configparser
import dataclasses
import subprocess
from pathlib import Path

import pytest

from gpuprov.errors import BadInput
from gpuprov.sandbox import cluster, debian_archive, inventory
from tests.unit.sandbox.test_inventory_and_keys import context

NODES = [
    inventory.NodeEntry("node1", "10.0.0.2", "debian12"),
    inventory.NodeEntry("node2", "10.0.0.3", "debian12"),
]


def parsed(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(allow_no_value=True, delimiters=("=",))
    parser.read_string(text.replace("#", ";"))
    return parser


def test_slurm_inventory_makes_node1_the_controller_with_container_safe_settings(tmp_path: Path) -> None:
    ctx = dataclasses.replace(context(tmp_path), slurm=True)
    parser = parsed(inventory.render(NODES, ctx))
    assert list(parser["slurm_controller"]) == ["node1"]
    assert parser["all:vars"]["slurm_container_safe"] == "true"
    assert parser["all:vars"]["slurm_allow_no_gpu"] == "true"


def test_plain_inventory_has_no_slurm(tmp_path: Path) -> None:
    parser = parsed(inventory.render(NODES, context(tmp_path)))
    assert "slurm_controller" not in parser
    assert "slurm_container_safe" not in parser["gpu_nodes:vars"]


def test_slurm_needs_debian12_nodes() -> None:
    cluster.validate_slurm_oses(["debian12", "debian12"])
    with pytest.raises(BadInput, match=r"--slurm needs debian12 nodes only.*rocky9, ubuntu22.04"):
        cluster.validate_slurm_oses(["debian12", "ubuntu22.04", "rocky9"])


def test_node_source_is_a_flat_deb822_entry_signed_by_the_sandbox_key() -> None:
    text = debian_archive.node_source()
    fields = dict(line.split(": ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert fields == {
        "Types": "deb",
        "URIs": "http://mirror/debian/",
        "Suites": "./",
        "Signed-By": "/etc/apt/keyrings/gpuprov-sandbox.asc",
    }


def test_closure_keeps_real_packages_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # `apt-cache depends --recurse` output: real packages at the left margin, virtual ones in <...>.
    output = "slurmd\n  Depends: munge\nmunge\n  Depends: <debconf-2.0>\n<debconf-2.0>\n  debconf\ndebconf\n"

    def fake_run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        assert cmd[:3] == ["apt-cache", "depends", "--recurse"]
        return subprocess.CompletedProcess(cmd, 0, output, "")

    monkeypatch.setattr(debian_archive.subprocess, "run", fake_run)
    assert debian_archive.closure(("slurmd",)) == ["debconf", "munge", "slurmd"]
