"""roles/slurm_pyxis on the Slurm sandbox (real Debian 12 Slurm 22.05.8): enroot's release packages and
pyxis built from NVIDIA's sources here (nvidia_builds), handed to the nodes as files in place of GitHub's
release downloads; pyxis itself is built on each node by the role, against the node's libslurm-dev.
Skipped where NVIDIA's sources are not on this machine (nvidia_builds.unavailable says why)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Sandbox
from tests.integration.slurm import nvidia_builds
from tests.integration.slurm.conftest import SLURM_NODES, node_container, run_slurm_play
from tests.integration.slurm.test_slurm_role import changed_counts, on

# Decided at collection, so a machine without NVIDIA's sources starts no Slurm cluster for these tests.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(nvidia_builds.unavailable() is not None, reason=str(nvidia_builds.unavailable())),
]

NODE_DIR = "/srv/gpuprov-nvidia"  # where the built files lie on each node (file:// URLs)
PLUGIN = "/usr/local/lib/slurm/spank_pyxis.so"


@pytest.fixture(scope="module")
def pyxis_vars(slurm_cluster: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The role's settings (a JSON extra-vars file) with the built files copied onto both nodes."""
    release = nvidia_builds.build(tmp_path_factory.mktemp("nvidia-builds"))
    for node in SLURM_NODES:
        container = node_container(slurm_cluster, node)
        subprocess.run(["docker", "exec", container, "rm", "-rf", NODE_DIR], check=True)
        subprocess.run(["docker", "cp", f"{release.root}/.", f"{container}:{NODE_DIR}"], check=True)
    settings = {
        "slurm_pyxis_enabled": True,
        "slurm_pyxis_enroot_version": nvidia_builds.ENROOT_VERSION,
        "slurm_pyxis_version": nvidia_builds.PYXIS_VERSION,
        "slurm_pyxis_enroot_release_url": f"file://{NODE_DIR}/enroot",
        "slurm_pyxis_source_url": f"file://{NODE_DIR}/pyxis/pyxis-{nvidia_builds.PYXIS_VERSION}.tar.gz",
        "slurm_pyxis_checksums": release.checksums,
    }
    path = tmp_path_factory.mktemp("pyxis-vars") / "pyxis.json"
    path.write_text(json.dumps(settings))
    yield path
    # The other Slurm tests share these nodes: pyxis goes out of their plugin stack again.
    for node in SLURM_NODES:
        on(slurm_cluster, node, "rm", "-f", "/etc/slurm/plugstack.conf.d/pyxis.conf")
        on(slurm_cluster, node, "systemctl", "restart", "slurmd")


@pytest.fixture(scope="module")
def pyxis_cluster(slurm_cluster: Sandbox, pyxis_vars: Path) -> Sandbox:
    code, output = run_slurm_play(slurm_cluster, slurm_cluster.inventory, "-e", f"@{pyxis_vars}")
    assert code == 0, output
    return slurm_cluster


def test_srun_has_pyxis_and_enroot_answers(pyxis_cluster: Sandbox) -> None:
    for node in SLURM_NODES:
        assert "--container-image" in on(pyxis_cluster, node, "srun", "--help").stdout
        assert on(pyxis_cluster, node, "enroot", "version").stdout.strip() == nvidia_builds.ENROOT_VERSION
        held = on(pyxis_cluster, node, "apt-mark", "showhold").stdout.split()
        assert {"enroot", "enroot+caps"} <= set(held), held
        stamp = on(pyxis_cluster, node, "cat", "/usr/local/share/pyxis/gpuprov-build").stdout
        assert stamp.startswith(f"pyxis={nvidia_builds.PYXIS_VERSION} slurm=22.05.8 source=sha256:"), stamp
    # A job step still runs with the plugin in slurmd's and slurmstepd's stack.
    job = on(pyxis_cluster, "node1", "srun", "--nodes=2", "--ntasks-per-node=1", "--time=1", "hostname")
    assert sorted(job.stdout.split()) == ["node1", "node2"], job.stderr


def test_second_run_changes_nothing_and_check_mode_is_clean(pyxis_cluster: Sandbox, pyxis_vars: Path) -> None:
    for extra in ((), ("--check",)):
        code, output = run_slurm_play(pyxis_cluster, pyxis_cluster.inventory, "-e", f"@{pyxis_vars}", *extra)
        assert code == 0, output
        assert changed_counts(output) == {"node1": 0, "node2": 0}, output


def test_rerun_repairs_a_changed_plugin_and_a_removed_entry(pyxis_cluster: Sandbox, pyxis_vars: Path) -> None:
    on(pyxis_cluster, "node2", "sh", "-c", f"echo drift >> {PLUGIN}")
    on(pyxis_cluster, "node1", "rm", "/etc/slurm/plugstack.conf.d/pyxis.conf")
    on(pyxis_cluster, "node1", "apt-mark", "unhold", "enroot")
    code, output = run_slurm_play(pyxis_cluster, pyxis_cluster.inventory, "-e", f"@{pyxis_vars}")
    assert code == 0, output
    assert "--container-image" in on(pyxis_cluster, "node1", "srun", "--help").stdout
    assert "enroot" in on(pyxis_cluster, "node1", "apt-mark", "showhold").stdout.split()
    assert "drift" not in on(pyxis_cluster, "node2", "tail", "-c", "6", PLUGIN).stdout


def test_a_file_without_a_checksum_is_refused(pyxis_cluster: Sandbox, pyxis_vars: Path) -> None:
    settings = json.loads(pyxis_vars.read_text())
    settings["slurm_pyxis_checksums"] = {}
    unchecked = pyxis_vars.with_name("unchecked.json")
    unchecked.write_text(json.dumps(settings))
    code, output = run_slurm_play(pyxis_cluster, pyxis_cluster.inventory, "-e", f"@{unchecked}")
    assert code != 0
    assert "a sha256 in slurm_pyxis_checksums for enroot_4.1.2-1_amd64.deb" in output, output
