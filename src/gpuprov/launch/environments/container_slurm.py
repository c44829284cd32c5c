"""`--image` through Slurm (`--scheduler slurm`, `--emit-sbatch`): the part of the sbatch script that runs
each node's ranks inside the image.

Two ways, chosen when the job runs (so a written script works on either kind of cluster): where srun has
pyxis's options (`srun --help` lists `--container-image` once the pyxis SPANK plugin is loaded: NVIDIA/pyxis
wiki, Installation, "Verifying srun"), srun starts each task in the image itself (enroot); else each node's
task runs the node's container engine, one container per node named `gpuprov-slurm-<job>-<node>`, with the
flags and the teardown of `gpuprov launch --image` (container_run; templates/container.sh.j2).

pyxis passes `--container-image` to enroot as `docker://IMAGE` (pyxis_slurmstepd.c). enroot before 4.0 reads
only `docker://[USER@][REGISTRY#]IMAGE[:TAG]` (src/docker.sh of v3.5.0: a registry only before `#`, no
`@digest`); 4.0.0 reads Docker's own references (commit f29a45c, "Improve handling of docker-style URI").
So the script asks the node's `enroot version` and, below 4, writes the registry with `#` and refuses a
digest in one line.

The engine path's container gets the GPUs Slurm gave the step (SLURM_STEP_GPUS, else SLURM_JOB_GPUS: the
node's GPU indexes; else CUDA_VISIBLE_DEVICES), not all of them: it runs under dockerd or conmon, outside
the step's cgroup, where Slurm's device constraint does not reach. On SIGTERM (scancel, the time limit)
`ENGINE stop -t 10` ends it within ten seconds (SIGKILL after), well inside slurmd's KillWait (30 s by
default), and `rm -f` on exit removes it.
"""

from __future__ import annotations

from gpuprov.launch.environments import container_run
from gpuprov.launch.render import SbatchJob, quote

STOP_SECONDS = 10  # the engine's SIGTERM-to-SIGKILL grace; under slurmd's default KillWait of 30 s


def enroot_reference() -> list[str]:
    """A bash function: the reference pyxis should hand enroot on this node (its `enroot version`), or
    one line on stderr and status 1 (no enroot; a digest for an enroot before 4.0)."""
    return [
        "enroot_reference() {",
        "  local ref=$1 version major first",
        "  version=$(enroot version 2>/dev/null) || version=",
        "  major=${version%%.*}",
        '  if ! [[ "$major" =~ ^[0-9]+$ ]]; then',
        "    echo \"gpuprov: srun has pyxis but 'enroot version' on $(hostname) says ${version:-nothing}:\""
        ' "install enroot on the nodes" >&2',
        "    return 1",
        "  fi",
        '  if [ "$major" -ge 4 ]; then printf "%s\\n" "$ref"; return 0; fi  # 4.0 on: Docker\'s references',
        '  case "$ref" in *@sha256:*)',
        '    echo "gpuprov: enroot $version on $(hostname) (before 4.0) cannot pull by digest ($ref):"'
        ' "give the image by tag, or upgrade enroot to 4.0 or later" >&2',
        "    return 1 ;;",
        "  esac",
        "  first=${ref%%/*}",
        '  case "$ref" in *"#"*) ;; */*)',
        '    case "$first" in *.*|*:*|localhost) ref="$first#${ref#*/}" ;; esac ;;',
        "  esac",
        '  printf "%s\\n" "$ref"',
        "}",
    ]


def gpu_selection() -> list[str]:
    """Bash that replaces the "all GPUs" flag in $flags by the GPUs Slurm allocated (array gpu_args)."""
    return [
        "gpu_args=()",
        'if [ "$g" = 1 ]; then',
        "  gpus=${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}}",
        '  if [ -n "$gpus" ]; then',
        "    flags=${flags/--gpus all/}; flags=${flags/--device nvidia.com\\/gpu=all/}",
        '    if [ "$engine" = docker ]; then gpu_args=(--gpus "\\"device=$gpus\\"");',
        '    else for i in ${gpus//,/ }; do gpu_args+=(--device "nvidia.com/gpu=$i"); done; fi',
        "  else",
        '    echo "gpuprov: Slurm allocated no GPUs to this step on $(hostname); its container gets all the'
        " node's GPUs (request them: #SBATCH --gres=gpu:N; an exclusive job's steps get only the GPUs it"
        ' requested: srun(1))" >&2',
        "  fi",
        "fi",
    ]


def engine_choice() -> list[str]:
    """Bash that sets run=(ENGINE...) (sudo -n where the user cannot use it) and the host's g/ib (1/0)."""
    return [
        "engine=; for e in docker podman; do",
        '  command -v "$e" >/dev/null 2>&1 && { engine=$e; break; }',
        "done",
        'if [ -z "$engine" ]; then',
        '  echo "gpuprov: $(hostname) has neither docker nor podman and Slurm has no pyxis; apply the '
        'container_runtime role" >&2',
        "  exit 1",
        "fi",
        'run=("$engine")',
        'if [ "$engine" = podman ] && [ "$(id -u)" != 0 ]; then run=(sudo -n podman);',
        'elif ! "$engine" info >/dev/null 2>&1; then run=(sudo -n "$engine"); fi',
        'g=0; [ "$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")" -gt 0 ] && g=1',
        'ib=0; [ -n "$(ls /dev/infiniband 2>/dev/null)" ] && ib=1',
    ]


def env_file(env_names: list[str]) -> list[str]:
    """Bash that writes the job's variables that are set to $envfile (0600, in the mounted job directory)
    as bash `export` lines, which the container sources before the command.

    Not `--env NAME`: under `sudo -n ENGINE` sudo's default env_reset drops them before the engine's
    client reads them (sudoers(5), env_reset). Not `--env-file`: Docker takes a value as written (its
    opts/envfile.go) and newer Podman strips quotes and reads multi-line values (podman's env-file option
    page), so one file would mean two things. Not `--env NAME=VALUE`: values would show in `ps`."""
    return [
        "envfile=$PWD/.gpuprov-env-$SLURM_JOB_ID-$SLURM_NODEID",
        f"( umask 077; for n in {' '.join(env_names)}; do",
        '  if [ -n "${!n+x}" ]; then printf \'export %s=%q\\n\' "$n" "${!n}"; fi',
        'done > "$envfile" )',
    ]


def node_script(env_names: list[str]) -> str:
    """The engine path's task on one node: `bash -c SCRIPT gpuprov-node IMAGE COMMAND...`."""
    return "\n".join(
        [
            "set -euo pipefail",
            "image=$1; shift",
            *engine_choice(),
            *container_run.flags_case("engine", "g", "ib"),
            # Podman's flags have label=disable; Docker confines containers only where its daemon runs
            # with SELinux on (`docker info` lists name=selinux): then the same, or the mounted home and
            # workdir (user_home_t, nfs_t) cannot be read from container_t.
            'security=; [ "$engine" = docker ] && security=$("${run[@]}" info --format '
            '"{{json .SecurityOptions}}" 2>/dev/null || true)',
            'case "$security" in *name=selinux*) flags="$flags --security-opt label=disable" ;; esac',
            *gpu_selection(),
            "name=gpuprov-slurm-$SLURM_JOB_ID-$SLURM_NODEID",
            *env_file(env_names),
            'remove() { "${run[@]}" rm -f "$name" >/dev/null 2>&1 || true; '
            'rm -f "$envfile" 2>/dev/null || true; }',
            # Bounded: SIGTERM, SIGKILL after STOP_SECONDS; an unbounded wait would outlast KillWait.
            'stopping() { trap "" TERM INT; "${run[@]}" stop -t '
            + str(STOP_SECONDS)
            + ' "$name" >/dev/null 2>&1 || true; exit "$1"; }',
            "trap remove EXIT",
            "trap 'stopping 143' TERM",
            "trap 'stopping 130' INT",
            '"${run[@]}" run --rm --name "$name" --sig-proxy=false $flags ${gpu_args[@]+"${gpu_args[@]}"} '
            '--user "$(id -u):$(id -g)" --env HOME="$HOME" --volume "$HOME:$HOME" '
            '--volume "$PWD:$PWD" --workdir "$PWD" "$image" bash -c \'. "$1"; shift; exec "$@"\' gpuprov-env '
            '"$envfile" "$@" &',
            'code=0; wait $! || code=$? ; exit "$code"',
        ]
    )


def block(job: SbatchJob, workdir_expr: str, env_names: list[str]) -> str:
    """Bash that sets the srun options (in_image) and the task's wrapper (node_wrap) for job.image."""
    return "\n".join(
        [
            "# --image: each node's ranks run inside the image: pyxis where srun has it, else the node's",
            "# docker or podman (one container per node, removed when the task ends).",
            f"image={quote(job.image)}",
            f"workdir={workdir_expr}",
            "node_container=$(cat <<'GPUPROV_NODE'",
            node_script(env_names),
            "GPUPROV_NODE",
            ")",
            *enroot_reference(),
            "srun_help=$(srun --help 2>/dev/null) || srun_help=",
            "if grep -q -- '--container-image' <<< \"$srun_help\"; then",
            '  enroot_image=$(enroot_reference "$image") || exit 1',
            '  echo "gpuprov: pyxis: srun --container-image=$enroot_image"',
            '  in_image=(--container-image="$enroot_image" --container-mounts="$workdir:$workdir" '
            '--container-workdir="$workdir")',
            # The user's home, as SSH launching's --image and the engine path mount it: enroot mounts it only
            # where its config sets ENROOT_MOUNT_HOME (off by default), and the image's own is read-only.
            "  if grep -q -- '--container-mount-home' <<< \"$srun_help\"; then",
            "    in_image+=(--container-mount-home)",
            "  fi",
            "  node_wrap=()",
            "else",
            '  echo "gpuprov: no pyxis in this Slurm: each node\'s container engine runs $image"',
            "  in_image=()",
            '  node_wrap=(bash -c "$node_container" gpuprov-node "$image")',
            "fi",
        ]
    )
