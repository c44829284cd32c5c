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

from tests.integration.conftest import BIN, Sandbox, gpuprov
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


# One rank of a job through pyxis: which python runs it (the image's /opt/venv exists only in the image), a
# variable given with --env, and an all-reduce across both nodes (1 + 2 on two ranks).
RANK_SCRIPT = """\
import os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1])
dist.all_reduce(total)
print(f"pyxis-rank {dist.get_rank()}/{dist.get_world_size()} python={sys.executable} "
      f"mark={os.environ.get('PYXIS_MARK')} sum={int(total)}", flush=True)
dist.destroy_process_group()
"""
SQUASH_DROP_IN = "/etc/enroot/enroot.conf.d/90-sandbox-speed.conf"
FAST_SQUASH = "ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -exit-on-error"  # mksquashfs(1): no compression
IMAGE_PYTHON = "/opt/venv/bin/python3"  # the sandbox image's venv with torch (gpuprov.sandbox.pytorch_image)


def launch_in_image(
    sandbox: Sandbox, image: str, inventory: Path, script: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "gpuprov"), "launch", "--scheduler", "slurm", "--nodes", "2", "--image", image,
         "-i", str(inventory), "--env", "PYXIS_MARK=given", str(script)],
        capture_output=True, text=True, env={**sandbox.env, "COLUMNS": "200"}, timeout=1500,
    )  # fmt: skip


def test_launch_image_trains_inside_the_image_through_pyxis(
    pyxis_cluster: Sandbox, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`gpuprov launch --scheduler slurm --image`: srun starts each node's torchrun in the image (pyxis,
    enroot importing it from the sandbox's registry), with the inventory's gpuprov_image_python."""
    # The registry and its image added to the shared sandbox (kept on its later `up`s; the Slurm tests'
    # inventory is a copy, so only this test's inventory names the image).
    gpuprov("sandbox", "up", "--name", pyxis_cluster.name, "--containers", env=pyxis_cluster.env, timeout=900)
    shown = gpuprov("sandbox", "inventory", "--name", pyxis_cluster.name, env=pyxis_cluster.env).stdout
    image = next(
        line.split("=", 1)[1]
        for line in Path(shown.strip()).read_text().splitlines()
        if line.startswith("gpuprov_sandbox_image=")
    )
    inventory = pyxis_cluster.inventory.with_name("pyxis-image-inventory.ini")
    inventory.write_text(
        pyxis_cluster.inventory.read_text() + f"\n[all:vars]\ngpuprov_image_python={IMAGE_PYTHON}\n"
    )
    # enroot compresses each import's squashfs with lzo (ENROOT_SQUASH_OPTIONS, enroot doc/cmd/import.md):
    # for the 1.19 GB image it had written 144 MB in 8 minutes on the loaded 2-core build machine, so the
    # test's nodes write it uncompressed (its content is the same; the drop-in goes again afterwards).
    for node in SLURM_NODES:
        on(pyxis_cluster, node, "sh", "-c", f"printf '%s\\n' '{FAST_SQUASH}' > {SQUASH_DROP_IN}")
    script = tmp_path_factory.mktemp("pyxis-job") / "ranks.py"
    script.write_text(RANK_SCRIPT)
    try:
        proc = launch_in_image(pyxis_cluster, image, inventory, script)
    finally:
        for node in SLURM_NODES:
            on(pyxis_cluster, node, "rm", "-f", SQUASH_DROP_IN)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "gpuprov: pyxis: srun --container-image=" in proc.stdout, proc.stdout
    ranks = sorted(line.split("| ", 1)[1] for line in proc.stdout.splitlines() if "| pyxis-rank " in line)
    assert ranks == [f"pyxis-rank {r}/2 python={IMAGE_PYTHON} mark=given sum=3" for r in (0, 1)], proc.stdout
    assert {line.split("/")[0] for line in proc.stdout.splitlines() if "| pyxis-rank " in line} == {
        "node1",
        "node2",
    }, proc.stdout
    jobs = subprocess.run(
        [str(BIN / "gpuprov"), "jobs"], capture_output=True, text=True, env=pyxis_cluster.env, timeout=60
    )
    assert "succeeded (slurm " in jobs.stdout, jobs.stdout
