"""`--image` in the sbatch script (`--emit-sbatch`, `--scheduler slurm`): run with bash against a fake srun
and scontrol, it takes pyxis's `srun --container-image` where `srun --help` lists it (pyxis's own check:
NVIDIA/pyxis wiki, Installation, "Verifying srun"), else runs each node's task in the node's engine, one
container named after the Slurm job and node, removed when the task ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gpuprov.launch import options, sbatch
from gpuprov.launch.environments import container_slurm

RECORDED_ENROOT = Path(__file__).parents[2] / "recorded" / "enroot"

IMAGE = "registry.sandbox:5000/gpuprov/torch-cpu@sha256:" + "ab" * 32
RECORDED_PYXIS = Path(__file__).parents[2] / "recorded" / "pyxis"
# srun --help with pyxis 0.24.0 loaded (recorded in a sandbox node: tests/recorded/pyxis/README.md).
PYXIS_HELP = (RECORDED_PYXIS / "srun-help-pyxis-0.24.0-slurm-22.05.8.txt").read_text()

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
FAKE_ENROOT = r"""#!/bin/bash
[ "$1" = version ] && cat "$FAKE_ENROOT_VERSION"
"""
FAKE_SCONTROL = r"""#!/bin/bash
case "$2" in hostnames) echo node1 ;; node) echo "NodeName=node1 NodeAddr=10.0.0.1 State=IDLE" ;; esac
"""


def run_script(tmp_path: Path, help_text: str, enroot: str = "version-4.0.0.txt") -> list[str]:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    opts = options.build(script=str(script), nodes=1, image=IMAGE, env=("FOO=bar",),
                         emit_sbatch=str(tmp_path / "job.sbatch"))  # fmt: skip
    text = sbatch.build(opts, [])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = (
        ("srun", FAKE_SRUN),
        ("docker", FAKE_ENGINE),
        ("scontrol", FAKE_SCONTROL),
        ("enroot", FAKE_ENROOT),
    )
    for name, body in fakes:
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "FAKE_LOG": str(log),
           "FAKE_SRUN_HELP": help_text, "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node1",
           "SLURM_NNODES": "1", "FAKE_ENROOT_VERSION": str(RECORDED_ENROOT / enroot)}  # fmt: skip
    done = subprocess.run(["bash", "-c", text], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_pyxis_starts_each_task_in_the_image(tmp_path: Path) -> None:
    (srun,) = run_script(tmp_path, PYXIS_HELP)
    work = str(tmp_path)
    assert srun.startswith(
        f"srun --kill-on-bad-exit=1 --label --ntasks-per-node=1 --chdir={work} --container-image={IMAGE} "
        f"--container-mounts={work}:{work} --container-workdir={work} --container-mount-home bash -c "
    )  # bash -c: the task's own environment first (templates/slurm-node-routes.sh.j2), inside the image
    assert " gpuprov-node python3 -m torch.distributed.run " in srun


def test_a_pyxis_without_the_home_option_is_not_asked_for_it(tmp_path: Path) -> None:
    # Only the image option listed (a pyxis built before the home option, or trimmed help).
    (srun,) = run_script(tmp_path, "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n")
    assert "--container-image=" in srun and "--container-mount-home" not in srun


def test_without_pyxis_each_node_runs_its_engine_and_removes_the_container(tmp_path: Path) -> None:
    calls = run_script(tmp_path, "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]\n")
    srun, info, security, run, remove = calls
    assert srun.startswith(
        f"srun --kill-on-bad-exit=1 --label --ntasks-per-node=1 --chdir={tmp_path} bash -c "
    )
    assert info == "docker info"  # the user may run docker (else: sudo -n docker)
    assert security == "docker info --format {{json .SecurityOptions}}"  # SELinux on: label=disable
    assert run == (
        "docker run --rm --name gpuprov-slurm-77-0 --sig-proxy=false --init --pull never --network host "
        "--ipc host --ulimit stack=67108864 --user "
        f"{os.getuid()}:{os.getgid()} --env HOME={tmp_path} "
        f"--volume {tmp_path}:{tmp_path} "
        f"--volume {tmp_path}:{tmp_path} --workdir {tmp_path} "
        f'{IMAGE} bash -c . "$1"; shift; exec "$@" gpuprov-env {tmp_path}/.gpuprov-env-77-0 '
        "python3 -m torch.distributed.run --nnodes 1 --nproc-per-node 1 --rdzv-backend c10d "
        "--rdzv-endpoint 10.0.0.1:29500 --rdzv-id 77 --max-restarts 0 --tee 3 train.py"
    )
    assert remove == "docker rm -f gpuprov-slurm-77-0"
    assert not (tmp_path / ".gpuprov-env-77-0").exists()  # removed with the container


# An engine whose `run` runs the command after the image with an empty environment (a container has only
# what it is given), and a sudo that keeps none of the caller's variables (sudoers' default env_reset).
FAKE_RUNNING_ENGINE = r"""#!/bin/bash
[ "$1" = run ] || exit 0
while [ "$1" != IMG ]; do shift; done; shift
exec env -i PATH=/usr/bin:/bin "$@"
"""
FAKE_RESET_SUDO = '#!/bin/bash\nshift; exec env -i PATH="$PATH" "$@"\n'


def test_the_jobs_variables_reach_the_container_through_sudo(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {"podman": FAKE_RUNNING_ENGINE, "sudo": FAKE_RESET_SUDO}.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    for tool in ("id", "grep", "ls", "env", "hostname", "rm"):
        (bin_dir / tool).symlink_to(str(shutil.which(tool)))
    value = 'it\'s "quoted" $HOME\nand two lines'
    script = container_slurm.node_script(["FOO", "UNSET_ONE"])
    show = 'printf "%s|" "$FOO" "${UNSET_ONE-unset}"; stat -c %a "$1"'
    done = subprocess.run(
        [str(shutil.which("bash")), "-c", script, "gpuprov-node", "IMG", "bash", "-c", show, "x",
         str(tmp_path / ".gpuprov-env-5-1")],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path), "SLURM_JOB_ID": "5", "SLURM_NODEID": "1",
             "FOO": value},
        cwd=tmp_path, capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{value}|unset|600\n"  # as set, unset stays unset, the file only the user's
    assert not (tmp_path / ".gpuprov-env-5-1").exists()


@pytest.mark.parametrize("image", ["", IMAGE])
def test_the_script_is_valid_bash(tmp_path: Path, image: str) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    opts = options.build(script=str(script), nodes=2, image=image or None, emit_sbatch=str(tmp_path / "s"))
    assert subprocess.run(["bash", "-n"], input=sbatch.build(opts, []), text=True).returncode == 0


def test_an_enroot_before_4_refuses_a_digest_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"enroot 3\.5\.0 on .* cannot pull by digest"):
        run_script(tmp_path, PYXIS_HELP, enroot="version-3.5.0.txt")


def enroot_reference(tmp_path: Path, ref: str, version_file: str | None) -> subprocess.CompletedProcess[str]:
    """The script's enroot_reference function run by bash, `enroot version` answering a recorded output."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if version_file:
        (bin_dir / "enroot").write_text(FAKE_ENROOT)
        (bin_dir / "enroot").chmod(0o755)
    function = "\n".join(container_slurm.enroot_reference())
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "FAKE_ENROOT_VERSION": str(RECORDED_ENROOT / (version_file or "-")),
    }
    return subprocess.run(
        ["bash", "-c", function + '\nenroot_reference "$1"', "x", ref],
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("version", ["version-3.4.1.txt", "version-3.5.0.txt"])
@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io#nvidia/pytorch:25.01-py3"),
        ("registry.sandbox:5000/gpuprov/torch-cpu:1", "registry.sandbox:5000#gpuprov/torch-cpu:1"),
        ("localhost/team/torch:2", "localhost#team/torch:2"),
        ("nvcr.io#nvidia/pytorch:25.01-py3", "nvcr.io#nvidia/pytorch:25.01-py3"),  # already enroot's
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", "nvidia/cuda:12.4.1-base-ubuntu22.04"),  # Docker Hub
        ("ubuntu:24.04", "ubuntu:24.04"),
    ],
)
def test_before_enroot_4_the_registry_goes_before_a_hash(
    tmp_path: Path, version: str, ref: str, expected: str
) -> None:
    done = enroot_reference(tmp_path, ref, version)
    assert (done.returncode, done.stdout, done.stderr) == (0, expected + "\n", "")


def test_before_enroot_4_a_digest_is_refused(tmp_path: Path) -> None:
    done = enroot_reference(tmp_path, IMAGE, "version-3.5.0.txt")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"gpuprov: enroot 3.5.0 on {os.uname().nodename} (before 4.0) cannot pull by digest ({IMAGE}): "
        "give the image by tag, or upgrade enroot to 4.0 or later"
    ]


@pytest.mark.parametrize("ref", [IMAGE, "nvcr.io/nvidia/pytorch:25.01-py3"])
def test_enroot_4_takes_docker_references_as_they_are(tmp_path: Path, ref: str) -> None:
    done = enroot_reference(tmp_path, ref, "version-4.0.0.txt")
    assert (done.returncode, done.stdout) == (0, ref + "\n")


def test_no_enroot_is_one_line(tmp_path: Path) -> None:
    done = enroot_reference(tmp_path, IMAGE, None)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "'enroot version' on" in done.stderr


# The engine path on a GPU node: a fake engine that logs its calls (run blocks until stop kills it).
FAKE_NODE_ENGINE = r"""#!/bin/bash
echo "$(basename "$0") $*" >> "$FAKE_LOG"
case "$1" in
  info) [ "$2" = --format ] && printf '%s\n' "$FAKE_SECURITY"; exit 0 ;;
  run) sleep 30 & echo $! > "$FAKE_LOG.pid"; wait ;;
  stop) kill "$(cat "$FAKE_LOG.pid")" 2>/dev/null; exit 0 ;;
esac
"""
FAKE_SMI = """#!/bin/bash
printf 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\\n'
"""


def start_node(tmp_path: Path, engine: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {engine: FAKE_NODE_ENGINE, "nvidia-smi": FAKE_SMI, "sudo": '#!/bin/bash\nshift; exec "$@"\n'}
    for name, body in fakes.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    for tool in ("id", "grep", "ls", "sleep", "cat", "basename", "hostname", "rm"):  # no other engine on PATH
        (bin_dir / tool).symlink_to(str(shutil.which(tool)))
    log = tmp_path / "log"
    base = {"PATH": str(bin_dir), "HOME": str(tmp_path), "FAKE_LOG": str(log), "SLURM_JOB_ID": "77",
            "SLURM_NODEID": "1", "FAKE_SECURITY": '["name=seccomp,profile=builtin"]'}  # fmt: skip
    script = container_slurm.node_script([])
    node = subprocess.Popen(
        [str(shutil.which("bash")), "-c", script, "gpuprov-node", "IMG", "python3", "x.py"],
        env={**base, **env},
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not (log.exists() and " run " in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return node, log


def run_line(log: Path) -> str:
    return next(line for line in log.read_text().splitlines() if " run " in line)


def test_the_container_gets_the_gpus_slurm_allocated_docker(tmp_path: Path) -> None:
    node, log = start_node(tmp_path, "docker", {"SLURM_STEP_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1"})
    node.send_signal(signal.SIGTERM)
    node.wait(timeout=20)
    line = run_line(log)
    assert '--gpus "device=2,3" ' in line and "--gpus all" not in line
    assert "--ulimit memlock=-1:-1" in line and "label=disable" not in line


def test_the_container_gets_the_gpus_slurm_allocated_podman_cdi(tmp_path: Path) -> None:
    node, log = start_node(tmp_path, "podman", {"SLURM_JOB_GPUS": "4,6"})
    node.send_signal(signal.SIGTERM)
    node.wait(timeout=20)
    line = run_line(log)
    assert "--device nvidia.com/gpu=4 --device nvidia.com/gpu=6 " in line
    assert "nvidia.com/gpu=all" not in line and "--security-opt label=disable" in line


def test_without_a_slurm_gpu_allocation_all_gpus_and_one_line_says_so(tmp_path: Path) -> None:
    node, log = start_node(tmp_path, "docker", {})
    node.send_signal(signal.SIGTERM)
    _, err = node.communicate(timeout=20)
    assert "--gpus all" in run_line(log)
    assert "Slurm allocated no GPUs to this step" in err


def test_docker_with_selinux_runs_the_container_with_label_disable(tmp_path: Path) -> None:
    selinux = '["name=seccomp,profile=builtin","name=selinux"]'
    node, log = start_node(tmp_path, "docker", {"FAKE_SECURITY": selinux, "SLURM_STEP_GPUS": "0"})
    node.send_signal(signal.SIGTERM)
    node.wait(timeout=20)
    assert "--security-opt label=disable" in run_line(log)


def test_scancel_stops_the_container_bounded_and_removes_it(tmp_path: Path) -> None:
    node, log = start_node(tmp_path, "docker", {"SLURM_STEP_GPUS": "0"})
    started = time.monotonic()
    node.send_signal(signal.SIGTERM)  # what slurmd sends the task on scancel or the time limit
    assert node.wait(timeout=20) == 143
    assert time.monotonic() - started < 5
    calls = log.read_text().splitlines()
    assert calls[-2:] == ["docker stop -t 10 gpuprov-slurm-77-1", "docker rm -f gpuprov-slurm-77-1"]
    assert not [c for c in calls if c.startswith(("docker wait", "docker kill"))]
