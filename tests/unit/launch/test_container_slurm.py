"""`--image` in the sbatch script (`--emit-sbatch`, `--scheduler slurm`): run with bash against a fake srun
and scontrol, it takes pyxis's `srun --container-image` where `srun --help` lists it (pyxis's own check:
NVIDIA/pyxis wiki, Installation, "Verifying srun"), else runs each node's task in the node's engine, one
container named after the Slurm job and node, removed when the task ends."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuprov.launch import options, sbatch

IMAGE = "registry.sandbox:5000/gpuprov/torch-cpu@sha256:" + "ab" * 32
# The option as pyxis's README documents it (srun --help shows it under "Options provided by plugins").
PYXIS_HELP = "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n"

FAKE_SRUN = r"""#!/bin/bash
if [ "$1" = --help ]; then printf '%s' "$FAKE_SRUN_HELP"; exit 0; fi
echo "srun $*" | tr '\n' ' ' >> "$FAKE_LOG"; echo >> "$FAKE_LOG"
case "$*" in *--container-image=*) exit 0 ;; esac   # pyxis would start the task in the image
while [ "${1#--}" != "$1" ]; do shift; done   # srun's own options (all --name=value here)
SLURM_NODEID=0 exec "$@"
"""
FAKE_ENGINE = r"""#!/bin/bash
echo "docker $*" >> "$FAKE_LOG"
"""
FAKE_SCONTROL = r"""#!/bin/bash
case "$2" in hostnames) echo node1 ;; node) echo "NodeName=node1 NodeAddr=10.0.0.1 State=IDLE" ;; esac
"""


def run_script(tmp_path: Path, help_text: str) -> list[str]:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    opts = options.build(script=str(script), nodes=1, image=IMAGE, env=("FOO=bar",),
                         emit_sbatch=str(tmp_path / "job.sbatch"))  # fmt: skip
    text = sbatch.build(opts, [])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("srun", FAKE_SRUN), ("docker", FAKE_ENGINE), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "FAKE_LOG": str(log),
           "FAKE_SRUN_HELP": help_text, "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node1",
           "SLURM_NNODES": "1"}  # fmt: skip
    done = subprocess.run(["bash", "-c", text], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_pyxis_starts_each_task_in_the_image(tmp_path: Path) -> None:
    (srun,) = run_script(tmp_path, PYXIS_HELP)
    work = str(tmp_path)
    assert srun.startswith(
        f"srun --kill-on-bad-exit=1 --label --ntasks-per-node=1 --chdir={work} --container-image={IMAGE} "
        f"--container-mounts={work}:{work} --container-workdir={work} python3 -m torch.distributed.run "
    )


def test_without_pyxis_each_node_runs_its_engine_and_removes_the_container(tmp_path: Path) -> None:
    calls = run_script(tmp_path, "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]\n")
    srun, info, run, remove = calls
    assert srun.startswith(
        f"srun --kill-on-bad-exit=1 --label --ntasks-per-node=1 --chdir={tmp_path} bash -c "
    )
    assert info == "docker info"  # the user may run docker (else: sudo -n docker)
    assert run == (
        "docker run --rm --name gpuprov-slurm-77-0 --sig-proxy=false --init --pull never --network host "
        "--ipc host --ulimit stack=67108864 --user "
        f"{os.getuid()}:{os.getgid()} --env HOME={tmp_path} --env FOO "
        f"--env TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE --volume {tmp_path}:{tmp_path} "
        f"--volume {tmp_path}:{tmp_path} --workdir {tmp_path} "
        f"{IMAGE} python3 -m torch.distributed.run --nnodes 1 --nproc-per-node 1 --rdzv-backend c10d "
        "--rdzv-endpoint 10.0.0.1:29500 --rdzv-id 77 --max-restarts 0 --tee 3 train.py"
    )
    assert remove == "docker rm -f gpuprov-slurm-77-0"


@pytest.mark.parametrize("image", ["", IMAGE])
def test_the_script_is_valid_bash(tmp_path: Path, image: str) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    opts = options.build(script=str(script), nodes=2, image=image or None, emit_sbatch=str(tmp_path / "s"))
    assert subprocess.run(["bash", "-n"], input=sbatch.build(opts, []), text=True).returncode == 0
