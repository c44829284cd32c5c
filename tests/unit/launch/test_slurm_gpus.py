"""The GPU request of a Slurm job: each node's GPU count read from sinfo (a recorded real output of Debian
12's Slurm 22.05.8 with stand-in GPUs, and the forms sinfo(1) documents), and the request lines of both
sbatch templates (#SBATCH --gres=gpu:N; a step gets only the GPUs its job requested: srun(1), --gres)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuprov import ssh
from gpuprov.launch import options, render, sbatch, slurm_gpus
from gpuprov.launch.launchers.mpirun import Mpirun
from gpuprov.launch.launchers.torchrun import Torchrun

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "slurm"


def test_recorded_nodes_with_two_gpus_each() -> None:
    text = (RECORDED / "sinfo-node-gres-22.05.8").read_text()
    assert slurm_gpus.parse_node_gpus(text) == {"node1": 2, "node2": 2}


def test_recorded_nodes_without_gpus() -> None:
    text = (RECORDED / "sinfo-node-gres-none-22.05.8").read_text()
    assert slurm_gpus.parse_node_gpus(text) == {"node1": 0, "node2": 0}


@pytest.mark.parametrize(
    ("gres", "count"),
    [
        ("gpu:8", 8),
        ("gpu:h100:8", 8),
        ("gpu:h100:8(S:0-1)", 8),
        ("gpu:nvidia_h100_80gb_hbm3:8(S:0-1)", 8),  # an 8x H100 node with AutoDetect=nvml (Slurm 24.11.5)
        ("gpu:a100:4(S:0),gpu:v100:2(S:1)", 6),
        ("gpu:4(S:0,1),nic:2", 4),
        ("mps:400", 0),
        ("(null)", 0),
    ],
)
def test_gpu_count_of_a_gres_string(gres: str, count: int) -> None:
    assert slurm_gpus.gpu_count(gres) == count


def _job(tmp_path: Path, gpus: int, nproc: str = "gpu") -> render.SbatchJob:
    script = tmp_path / "train.py"
    script.write_text("")
    opts = options.build(script=str(script), nodes=2, nproc=nproc, emit_sbatch=str(tmp_path / "s.sh"))
    return sbatch.job(opts, [], 2, str(tmp_path), "train.py", "s.sh", gpus_per_node=gpus)


@pytest.mark.parametrize("launcher", [Torchrun(), Mpirun()], ids=["torchrun", "mpirun"])
def test_the_job_asks_for_each_nodes_gpus(tmp_path: Path, launcher: Torchrun | Mpirun) -> None:
    text = launcher.sbatch_script(_job(tmp_path, 8, nproc="8"))
    assert "#SBATCH --gres=gpu:8\n" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


@pytest.mark.parametrize("launcher", [Torchrun(), Mpirun()], ids=["torchrun", "mpirun"])
def test_no_gpus_no_request_and_a_hint(tmp_path: Path, launcher: Torchrun | Mpirun) -> None:
    text = launcher.sbatch_script(_job(tmp_path, 0, nproc="2"))
    assert "--gpus-per-node" not in [
        line.split("=")[0] for line in text.splitlines() if line.startswith("#SBATCH")
    ]
    assert "# No GPU request: on GPU nodes add one" in text


def test_one_rank_per_requested_gpu_without_slurm_gpus_on_node(tmp_path: Path) -> None:
    """SLURM_GPUS_ON_NODE is set from Slurm 21.08 on; with a request the script names the count itself."""
    assert "--nproc-per-node 8 " in Torchrun().sbatch_script(_job(tmp_path, 8))
    assert '--nproc-per-node "${SLURM_GPUS_ON_NODE:-1}" ' in Torchrun().sbatch_script(_job(tmp_path, 0))


@pytest.mark.parametrize("launcher", [Torchrun(), Mpirun()], ids=["torchrun", "mpirun"])
def test_the_job_s_python_is_chosen_after_its_env(tmp_path: Path, launcher: Torchrun | Mpirun) -> None:
    """`--env GPUPROV_PYTHON=...` overrides the script's Python (under pyxis a bare python3 ran the node's,
    not the image's: docs/containers.md), so the choice comes after the job's exports."""
    script = tmp_path / "train.py"
    script.write_text("")
    opts = options.build(
        script=str(script),
        nodes=2,
        nproc="2",
        emit_sbatch=str(tmp_path / "s.sh"),
        env=("GPUPROV_PYTHON=/opt/venv/bin/python3",),
    )
    job = sbatch.job(opts, [], 2, str(tmp_path), "train.py", "s.sh", python="/opt/venv/bin/python3")
    text = launcher.sbatch_script(job)
    assert text.index("export GPUPROV_PYTHON=") < text.index(
        "PYTHON=${GPUPROV_PYTHON:-/opt/venv/bin/python3}"
    )
    probe = text[: text.index("nodes=$(scontrol")] + 'echo "$PYTHON"\n'
    shown = subprocess.run(
        ["bash", "-c", probe], text=True, capture_output=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert shown.stdout.splitlines()[-1] == "/opt/venv/bin/python3", shown.stderr


def test_the_request_is_the_fewest_among_the_usable_nodes_and_uneven_ones_are_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One GPU off the bus sets every node's rank count (the request is per node): launch says which node;
    a node left out of the job (drained) does not lower the request."""
    listed = "node1 gpu:8\nnode2 gpu:7\nnode3 gpu:8\n"  # sinfo --Node --format '%N %G' (sinfo(1))
    monkeypatch.setattr(slurm_gpus.ssh, "run", lambda client, command: ssh.Result(0, listed, ""))
    assert slurm_gpus.per_node(None, "gpu", "node1") == 7  # type: ignore[arg-type]
    assert "node1 8, node2 7, node3 8" in capsys.readouterr().err
    assert slurm_gpus.per_node(None, "gpu", "node1", ["node1", "node3"]) == 8  # type: ignore[arg-type]
    assert "do not have the same GPUs" not in capsys.readouterr().err
