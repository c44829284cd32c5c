"""How a job's ranks run in a container on one host: the engine, the `run` flags and run.sh around the
launcher's script (templates/container.sh.j2), and what the host's answers say is missing.

The flags, and why (sources in docs/containers.md):
- `--network host`: ranks reach each other and the rendezvous at the host's addresses and ports;
- `--ipc host`: the host's /dev/shm, NCCL's shared-memory transport (Docker's 64 MB default breaks it:
  nccl#290, #342), and CUDA IPC between the ranks' processes;
- `--ulimit memlock=-1:-1` (pinned memory for NCCL and InfiniBand: on hosts with GPUs or IB; gloo over
  TCP pins nothing, and raising the limit needs CAP_SYS_RESOURCE where the engine runs) and
  `--ulimit stack=67108864`, as NVIDIA's PyTorch container documentation runs its images;
- GPUs: `--gpus all` (Docker, through the nvidia runtime's hook) or `--device nvidia.com/gpu=all` (CDI:
  Podman), only on hosts with GPUs;
- InfiniBand: `--device /dev/infiniband` and `--cap-add IPC_LOCK` where the host has IB devices;
- `--security-opt label=disable` (Podman): the container's processes are not confined by an SELinux label,
  as the user's own processes on the host are not; relabeling the mounted home (`:z`) would change the
  labels of the user's files on the host instead. SELinux stays enforcing on the host;
- `--init`: a small init as PID 1 forwards signals to the ranks' launcher and reaps what it leaves;
- `--rm`, `--pull never`, `--name gpuprov-<job id>`: the one container of the job on the host, removed when
  it ends, never a pull in the middle of a start.
"""

from __future__ import annotations

import functools
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuprov import resources

ENGINES = ("docker", "podman")
IN_CONTAINER_SCRIPT = "in-container.sh"
CONTAINER_FILE = "container"  # in the job's directory: the engine's command and the container's name
TEMPLATE = "container.sh.j2"
# The jobs' GPU flags per engine live in the container_runtime role, whose probe runs with exactly these (so
# it takes the jobs' path: Docker's --gpus through the toolkit's legacy hook, Podman's CDI).
ROLE_VARS = Path("container_runtime") / "vars" / "main.yml"
GPU_FLAGS_VARIABLE = "container_runtime_gpu_run_flags"


@dataclass(frozen=True)
class Engine:
    name: str  # docker or podman
    sudo: bool = False  # run through `sudo -n` (the user cannot use the engine directly)

    @property
    def argv(self) -> list[str]:
        return ["sudo", "-n", self.name] if self.sudo else [self.name]

    @property
    def label(self) -> str:
        return " ".join(self.argv)


def engine_find(wanted: str | None) -> str:
    """Shell: $engine, the engine the inventory names, else the first of ENGINES on the host ('' if none)."""
    engines = [wanted] if wanted else list(ENGINES)
    return (
        f"engine=; for e in {' '.join(shlex.quote(e) for e in engines)}; do "
        'command -v "$e" >/dev/null 2>&1 && { engine=$e; break; }; done'
    )


def engine_via() -> str:
    """Shell, after engine_find: how gpuprov runs $engine on this host, decided here only (preflight's check
    and --push-image's helper both use it, so a pushed image lands in the store the job runs from).

    Sets $run (the engine's command), $via (user or sudo), $out (`ENGINE info` as JSON) and $r (its rc).
    Docker as the user first (docker group, root), else through `sudo -n`; Podman through `sudo -n` first:
    rootless Podman cannot give the job's flags, and its store is the user's, not root's.
    """
    return (
        # `docker info` exits 0 when the daemon refused the user (its JSON then has ServerErrors: recorded)
        "info() { out=$($run info --format '{{json .}}' 2>&1); r=$?; "
        'case "$out" in *\'"ServerErrors":[\'*) r=1 ;; esac; }; '
        'via=user; run="$engine"; '
        'if [ "$engine" = podman ] && [ "$(id -u)" != 0 ] && sudo -n true 2>/dev/null; then '
        'via=sudo; run="sudo -n podman"; fi; info; '
        "if [ $r -ne 0 ] && [ $via = user ] && sudo -n true 2>/dev/null; then "
        'via=sudo; run="sudo -n $engine"; info; fi'
    )


def container_name(job_id: str) -> str:
    return f"gpuprov-{job_id}"


@functools.cache
def gpu_flags(engine: str) -> list[str]:
    """The GPU flags of a job's container for engine, from the container_runtime role's vars."""
    role_vars = yaml.safe_load((resources.data_dir("roles") / ROLE_VARS).read_text(encoding="utf-8"))
    return [str(word) for word in role_vars[GPU_FLAGS_VARIABLE][engine]]


def run_flags(engine: str, gpus: bool, ib: bool) -> list[list[str]]:
    """The flags of every container gpuprov starts for a job (and of preflight's check container), each
    option with its value."""
    flags = [["--init"], ["--pull", "never"], ["--network", "host"], ["--ipc", "host"]]
    if gpus or ib:
        flags.append(["--ulimit", "memlock=-1:-1"])
    flags.append(["--ulimit", "stack=67108864"])
    if engine == "podman":
        flags.append(["--security-opt", "label=disable"])
    if gpus:
        flags.append(gpu_flags(engine))
    if ib:
        flags += [["--device", "/dev/infiniband"], ["--cap-add", "IPC_LOCK"]]
    return flags


def run_words(engine: str, gpus: bool, ib: bool) -> list[str]:
    return [word for flag in run_flags(engine, gpus, ib) for word in flag]


def flags_case(engine_var: str, gpus_var: str, ib_var: str) -> list[str]:
    """A bash `case` that sets $flags to run_words() for the engine and the host's GPUs (1/0) and IB (1/0)
    in those variables: the same flags where the shell, not gpuprov, learns the host (preflight, Slurm)."""
    lines = [f'case "${engine_var}:${gpus_var}:${ib_var}" in']
    for engine in ENGINES:
        for gpus in (0, 1):
            for ib in (0, 1):
                words = " ".join(shlex.quote(w) for w in run_words(engine, bool(gpus), bool(ib)))
                lines.append(f"{engine}:{gpus}:{ib}) flags={shlex.quote(words)} ;;")
    return [*lines, "esac"]


def info_error(lines: list[str]) -> str:
    """Why `ENGINE info` failed: Docker's ServerErrors in its JSON (it exits 0 then), else the last line."""
    try:
        errors = json.loads("\n".join(lines)).get("ServerErrors") or []
    except (ValueError, AttributeError):
        errors = []
    return str(errors[0]) if errors else (lines or ["no answer"])[-1].strip()


def toolkit_problem(engine: Engine, info_json: str, cdi_files: list[str], gpus: int) -> str | None:
    """What keeps the engine from running the job's containers (from `ENGINE info` and the CDI specs)."""
    try:
        info = json.loads(info_json)
    except ValueError:
        return f"`{engine.label} info` did not answer in JSON"
    if engine.name == "podman" and info.get("host", {}).get("security", {}).get("rootless"):
        return (
            "Podman runs rootless for this user and `sudo -n podman` is not allowed; gpuprov runs Podman as "
            "root (allow the user `sudo -n podman`)"
        )
    if gpus == 0:
        return None
    if engine.name == "docker":
        runtimes = sorted(info.get("Runtimes") or {})
        if "nvidia" not in runtimes:
            return (
                f"the host has {gpus} GPU(s) but Docker has no nvidia runtime (docker info Runtimes: "
                f"{', '.join(runtimes) or 'none'}; NVIDIA Container Toolkit's `nvidia-ctk runtime configure` "
                "adds it)"
            )
        return None
    if not [line for line in cdi_files if line.strip()]:
        return (
            f"the host has {gpus} GPU(s) but no CDI spec names nvidia.com/gpu (in /etc/cdi or /var/run/cdi; "
            "the toolkit's refresh service writes it: `sudo systemctl start nvidia-cdi-refresh.service`)"
        )
    return None


def inside_problems(seen: dict[str, str], host_ib: list[str], gpus: int) -> list[str]:
    """What the check container saw that the job cannot run with (memlock, /dev/shm, IB devices, verbs)."""
    problems = []
    memlock = seen.get("memlock", "")
    if (gpus or host_ib) and memlock != "unlimited":
        problems.append(f"memlock inside the container is {memlock or 'unknown'} KiB, not unlimited")
    shm = seen.get("shm", "")
    if gpus and (not shm.isdigit() or int(shm) < 1024 * 1024):
        problems.append(
            f"/dev/shm inside the container is {shm or 'unknown'} KiB; NCCL needs at least 1 GiB "
            "(nccl#290, #342): give the host a larger /dev/shm"
        )
    if host_ib:
        inside = set(seen.get("ib", "").split())
        lacking = [d for d in host_ib if d not in inside]
        if lacking:
            problems.append(f"InfiniBand devices {', '.join(lacking)} are not visible inside the container")
        if seen.get("verbs", "0") in ("", "0"):
            problems.append(
                "the host has InfiniBand but the image has no libibverbs, so NCCL would fall back to sockets "
                "(nccl#451); use an image with rdma-core (NVIDIA's NGC images have it)"
            )
    return problems


def wrap(script: str, *, engine: Engine, image: str, name: str, job_dir: str, gpus: bool, ib: bool) -> str:
    """run.sh: the launcher's script written into the job's directory and run inside the container."""
    from gpuprov.launch import render

    marker = "GPUPROV_END_OF_SCRIPT"
    while marker in script:
        marker += "_"
    return render.load(None, TEMPLATE).render(
        script=script.rstrip("\n"),
        marker=marker,
        engine=engine.argv,
        engine_name=engine.name,
        image=image,
        name=name,
        job_dir=job_dir,
        flags=[" ".join(render.quote(word) for word in flag) for flag in run_flags(engine.name, gpus, ib)],
        in_container=IN_CONTAINER_SCRIPT,
        container_file=CONTAINER_FILE,
    )
