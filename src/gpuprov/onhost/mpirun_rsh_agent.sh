#!/bin/bash
# Open MPI's rsh launcher (plm_rsh_agent) for a gpuprov job started with --launcher mpirun: mpirun runs it
# as `bash mpirun_rsh_agent.sh [SSH-OPTIONS...] HOST ORTED-COMMAND...` to start its daemon on another host
# (the options are Open MPI's plm_rsh_args, which the mpi role sets in the run user's
# ~/.openmpi/mca-params.conf: the cluster key and its known hosts; seen with Open MPI 4.1.4). It is pushed
# into the job's directory on every host, because mpirun passes its MCA settings on to the daemons, whose
# rsh component looks for the agent where they run.
#
# ssh never prompts (BatchMode: a host key it does not know fails, host keys stay checked). The remote
# shell exports the job's id before orted, so orted and the ranks it starts carry GPUPROV_JOB_ID: that
# host's agent finds them (teardown, gpuprov stop), and orted.started tells that host's standby
# (mpirun_standby.py) that the daemon came.
options=()
while [ $# -gt 0 ]; do
  case $1 in
    -[BbcDEeFIiJLlmOopQRSWw]) options+=("$1" "$2"); shift 2 ;;  # an ssh option with its value
    -?*) options+=("$1"); shift ;;
    *) break ;;
  esac
done
host=$1
shift
case $GPUPROV_JOB_ID in
  '' | *[!0-9a-f-]*) echo "mpirun_rsh_agent.sh: GPUPROV_JOB_ID is not a gpuprov job id" >&2; exit 2 ;;
esac
exec ssh -o BatchMode=yes -x "${options[@]}" "$host" "GPUPROV_JOB_ID=$GPUPROV_JOB_ID; export GPUPROV_JOB_ID; : >\"\$HOME\"/.gpuprov/jobs/$GPUPROV_JOB_ID/orted.started;" "$@"
