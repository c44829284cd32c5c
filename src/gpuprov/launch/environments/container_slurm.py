"""`--image` through Slurm (`--scheduler slurm`, `--emit-sbatch`): the part of the sbatch script that runs
each node's ranks inside the image.

Two ways, chosen when the job runs (so a written script works on either kind of cluster): where srun has
pyxis's options (`srun --help` lists `--container-image` once the pyxis SPANK plugin is loaded: NVIDIA/pyxis
wiki, Installation, "Verifying srun"), srun starts each task in the image itself (enroot); else each node's
task runs the node's container engine, one container per node named `gpuprov-slurm-<job>-<node>`, with the
flags and the teardown of `gpuprov launch --image` (container_run; templates/container.sh.j2).
"""

from __future__ import annotations

from gpuprov.launch.environments import container_run
from gpuprov.launch.render import SbatchJob, quote


def node_script(env_names: list[str]) -> str:
    """The engine path's task on one node: `bash -c SCRIPT gpuprov-node IMAGE COMMAND...`."""
    passed = " ".join(f"--env {name}" for name in env_names)
    return "\n".join(
        [
            "set -euo pipefail",
            "image=$1; shift",
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
            *container_run.flags_case("engine", "g", "ib"),
            "name=gpuprov-slurm-$SLURM_JOB_ID-$SLURM_NODEID",
            'remove() { "${run[@]}" rm -f "$name" >/dev/null 2>&1 || true; }',
            'stopping() { trap "" TERM INT; "${run[@]}" kill --signal TERM "$name" >/dev/null 2>&1 || true; '
            '"${run[@]}" wait "$name" >/dev/null 2>&1 || true; exit "$1"; }',
            "trap remove EXIT",
            "trap 'stopping 143' TERM",
            "trap 'stopping 130' INT",
            '"${run[@]}" run --rm --name "$name" --sig-proxy=false $flags --user "$(id -u):$(id -g)" '
            f'--env HOME="$HOME" {passed} --volume "$HOME:$HOME" --volume "$PWD:$PWD" --workdir "$PWD" '
            '"$image" "$@" &',
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
            "if srun --help 2>/dev/null | grep -q -- '--container-image'; then",
            '  echo "gpuprov: pyxis: srun --container-image=$image"',
            '  in_image=(--container-image="$image" --container-mounts="$workdir:$workdir" '
            '--container-workdir="$workdir")',
            "  node_wrap=()",
            "else",
            '  echo "gpuprov: no pyxis in this Slurm: each node\'s container engine runs $image"',
            "  in_image=()",
            '  node_wrap=(bash -c "$node_container" gpuprov-node "$image")',
            "fi",
        ]
    )
