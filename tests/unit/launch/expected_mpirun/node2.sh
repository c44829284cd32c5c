#!/usr/bin/env bash
# gpuprov job 20250101-000000-abcd: node2 is node 1 of 2; mpirun on the first host starts its 2 rank(s) through Open MPI's daemon.
# Rendered by `gpuprov launch --launcher mpirun` from templates/mpirun.sh.j2; runs in .gpuprov/jobs/20250101-000000-abcd/work on node2.
set -euo pipefail
cd "$HOME"/.gpuprov/jobs/20250101-000000-abcd/work
export NCCL_SOCKET_IFNAME=eth0
export GLOO_SOCKET_IFNAME=eth0
export FOO='bar baz'
export PYTHONUNBUFFERED=1
export GPUPROV_JOB_ID=20250101-000000-abcd
export GPUPROV_GPUS=2
export GPUPROV_GLOO_IFNAMES=10.0.0.1=eth0,10.0.0.2=eth0
exec /opt/gpuprov/envs/train/bin/python "$HOME"/.gpuprov/jobs/20250101-000000-abcd/mpirun_standby.py "$HOME"/.gpuprov/jobs/20250101-000000-abcd
