#!/usr/bin/env bash
# gpuprov job 20250101-000000-abcd: node1 is node 0 of 2; mpirun here starts all 4 rank(s) on the 2 host(s) (GPUs: NCCL).
# Rendered by `gpuprov launch --launcher mpirun` from templates/mpirun.sh.j2; runs in .gpuprov/jobs/20250101-000000-abcd/work on node1.
set -euo pipefail
cd "$HOME"/.gpuprov/jobs/20250101-000000-abcd/work
export NCCL_SOCKET_IFNAME=eth0
export GLOO_SOCKET_IFNAME=eth0
export FOO='bar baz'
export PYTHONUNBUFFERED=1
export GPUPROV_JOB_ID=20250101-000000-abcd
export GPUPROV_GPUS=2
export GPUPROV_GLOO_IFNAMES=10.0.0.1=eth0,10.0.0.2=eth0
# The hosts in node-rank order, each with --nproc-per-node slots; --map-by slot fills them in order.
cat > "$HOME"/.gpuprov/jobs/20250101-000000-abcd/hostfile <<'GPUPROV_HOSTFILE'
10.0.0.1 slots=2
10.0.0.2 slots=2
GPUPROV_HOSTFILE
# Open MPI's mpirun where the mpi role installs it (Debian/Ubuntu, EL; nothing on PATH on EL without its
# module), by its absolute path: that gives the remote daemons Open MPI's --prefix, so orted is found there.
mpirun=
for m in /usr/bin/mpirun.openmpi /usr/lib64/openmpi/bin/mpirun; do
  if [ -x "$m" ]; then mpirun=$m; break; fi
done
if [ -z "$mpirun" ]; then
  echo "gpuprov: no Open MPI mpirun on $(hostname) (/usr/bin/mpirun.openmpi, /usr/lib64/openmpi/bin/mpirun): apply the role mpi" >&2
  exit 127
fi
# mpirun refuses root without this (mpirun(1) of Open MPI 4.1, "Running as root"); the two variables are
# its documented equivalent of --allow-run-as-root (one rendered script serves a root and a non-root user).
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec "$mpirun" \
  --hostfile "$HOME"/.gpuprov/jobs/20250101-000000-abcd/hostfile \
  -np 4 \
  --bind-to none --map-by slot \
  --tag-output \
  --wdir "$HOME"/.gpuprov/jobs/20250101-000000-abcd/work \
  --mca plm_rsh_agent "bash ""$HOME"/.gpuprov/jobs/20250101-000000-abcd/mpirun_rsh_agent.sh \
  --mca plm_rsh_no_tree_spawn 1 \
  -x NCCL_SOCKET_IFNAME \
  -x GLOO_SOCKET_IFNAME \
  -x FOO \
  -x PYTHONUNBUFFERED \
  -x GPUPROV_JOB_ID \
  -x GPUPROV_GPUS \
  -x GPUPROV_GLOO_IFNAMES \
  /opt/gpuprov/envs/train/bin/python "$HOME"/.gpuprov/jobs/20250101-000000-abcd/mpirun_rank.py 10.0.0.1 29501 \
  sub/x.py --epochs 2 'a b'
