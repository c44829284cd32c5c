"""Slurm with stand-in GPUs on both nodes of the Slurm sandbox: the role writes each node's GPUs (gres.conf
File=/dev/nvidiaN, Gres=gpu:N in the node lines), its verify runs a step that sees them, and a
`gpuprov launch --scheduler slurm` job asks for them (#SBATCH --gres=gpu:N) so that its ranks get
CUDA_VISIBLE_DEVICES from Slurm's gres/gpu plugin. What differs from a real host: docs/slurm.md, "GPUs"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import standin_gpus
from tests.integration.conftest import Sandbox
from tests.integration.slurm.conftest import SLURM_NODES, run_slurm_play
from tests.integration.slurm.test_slurm_launch import gp
from tests.integration.slurm.test_slurm_role import on

pytestmark = pytest.mark.integration

GPUS = 2
RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "slurm"
SINFO_GRES = ("sinfo", "--noheader", "--Node", "--format", "%N %G")


def recorded(name: str) -> str | None:
    path = RECORDED / name
    return path.read_text() if path.exists() else None


def _on_all(sandbox: Sandbox, commands: list[str]) -> None:
    for node in SLURM_NODES:
        done = on(sandbox, node, "sh", "-c", " && ".join(commands))
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def gpu_cluster(slurm_cluster: Sandbox) -> Iterator[tuple[Sandbox, str, str]]:
    """Both nodes show two H100s (nvidia-smi stand-in, PCI functions, device files); the role runs again.
    Yields the sandbox, the play's output and sinfo's GPUs before."""
    before = on(slurm_cluster, "node1", *SINFO_GRES).stdout
    gpu = standin_gpus.H100_SXM5_80GB
    try:
        _on_all(slurm_cluster, [*gpu.present(GPUS), *standin_gpus.device_files(GPUS)])
        code, output = run_slurm_play(slurm_cluster, slurm_cluster.inventory)
        assert code == 0, output
        yield slurm_cluster, output, before
    finally:  # the other Slurm tests share these nodes: no GPUs again
        undo = [*standin_gpus.remove(), *standin_gpus.remove_device_files(GPUS)]
        for node in SLURM_NODES:
            on(slurm_cluster, node, "sh", "-c", " ; ".join(undo))
        code, output = run_slurm_play(slurm_cluster, slurm_cluster.inventory)
        assert code == 0, output


def test_the_role_writes_each_nodes_gpus_and_verify_sees_them(gpu_cluster: tuple[Sandbox, str, str]) -> None:
    sandbox, output, before = gpu_cluster
    gres = on(sandbox, "node1", "cat", "/etc/slurm/gres.conf").stdout
    for node in SLURM_NODES:
        assert [f"NodeName={node} Name=gpu File=/dev/nvidia{i}" for i in range(GPUS)] == [
            line for line in gres.splitlines() if line.startswith(f"NodeName={node} ")
        ], gres
    conf = on(sandbox, "node1", "cat", "/etc/slurm/slurm.conf").stdout
    assert len(re.findall(rf"^NodeName=node\d .* Gres=gpu:{GPUS} State=UNKNOWN$", conf, re.M)) == 2, conf
    sinfo = on(sandbox, "node1", *SINFO_GRES).stdout
    assert (before, sinfo) == (
        recorded("sinfo-node-gres-none-22.05.8"),
        recorded("sinfo-node-gres-22.05.8"),
    ), (
        before,
        sinfo,
    )
    # The role's GPU step ran for both nodes (a step that saw no GPUs, or the wrong count, fails the play).
    steps = re.findall(
        r"ok: \[node1\] => \(item=(node\d)\)", output.split("Run a step that sees its GPUs")[1]
    )
    assert sorted(set(steps))[:2] == ["node1", "node2"], output


def test_a_job_without_a_gpu_request_gets_none_in_its_step(gpu_cluster: tuple[Sandbox, str, str]) -> None:
    """srun(1): a step gets only the GPUs its job requested, not those an exclusive job holds."""
    sandbox, _, _ = gpu_cluster
    bare = on(
        sandbox,
        "node1",
        "srun",
        "--nodes=1",
        "--time=1",
        "sh",
        "-c",
        'echo "[${CUDA_VISIBLE_DEVICES-unset}]"',
    )
    asked = on(sandbox, "node1", "srun", "--nodes=1", f"--gres=gpu:{GPUS}", "--time=1", "printenv",
               "CUDA_VISIBLE_DEVICES")  # fmt: skip
    assert (bare.stdout.strip(), asked.stdout.strip()) == ("[unset]", "0,1"), (bare, asked)


def test_launch_ranks_see_their_gpus(gpu_cluster: tuple[Sandbox, str, str], tmp_path: Path) -> None:
    sandbox, _, _ = gpu_cluster
    script = tmp_path / "show_gpus.py"
    script.write_text(
        "import os\n"
        "print('GPUS', os.environ['SLURMD_NODENAME'], os.environ['LOCAL_RANK'],"
        " os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'), flush=True)\n"
    )
    done = gp(sandbox, "launch", "--scheduler", "slurm", str(script))
    assert done.returncode == 0, done.stdout + done.stderr
    seen = sorted(re.findall(r"GPUS (node\d) (\d) (\S+)", done.stdout))
    # --nproc auto: one rank per GPU Slurm gave the node (SLURM_GPUS_ON_NODE), each seeing the node's GPUs.
    assert seen == [(n, str(r), "0,1") for n in SLURM_NODES for r in range(GPUS)], done.stdout
