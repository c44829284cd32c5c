#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-persistenced @VERSION@: a shell script, no NVIDIA code.
# Like the real daemon it cannot start without GPUs and forks into the background (its units are
# Type=forking). Persistence mode follows the real options: on by default, --no-persistence-mode turns it
# off (nvidia-persistenced(1), "--persistence-mode, --no-persistence-mode: By default, nvidia-persistenced
# starts with persistence mode enabled for all devices"); nvidia-smi (the stand-in) reports it. --user
# needs the user to exist, as the real daemon drops its privileges to it.
PM_STATE=/run/gpuprov-standin/persistence-mode
. ./gpus-conf.sh

persistence=on
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) echo "nvidia-persistenced (gpuprov sandbox stand-in for version @VERSION@)"; exit 0 ;;
        -v|--version) echo "nvidia-persistenced:  version @VERSION@ (gpuprov sandbox stand-in)"; exit 0 ;;
        --persistence-mode) persistence=on ;;
        --no-persistence-mode) persistence=off ;;
        -u|--user) shift; user=$1 ;;
        --user=*) user=${1#--user=} ;;
        -V|--verbose) ;;
        *) echo "nvidia-persistenced: Unrecognized option: '$1'" >&2; exit 1 ;;
    esac
    shift
done
if [ -n "${user:-}" ] && ! id "$user" >/dev/null 2>&1; then
    echo "nvidia-persistenced failed to initialize: user '$user' does not exist (stand-in)." >&2
    exit 1
fi
if [ "$HAVE_GPUS" != 1 ]; then
    echo "nvidia-persistenced failed to initialize: no NVIDIA devices (stand-in; see $CONF)." >&2
    exit 1
fi
mkdir -p "$(dirname "$PM_STATE")" /var/run/nvidia-persistenced
if [ "$persistence" = on ]; then touch "$PM_STATE"; else rm -f "$PM_STATE"; fi
echo "nvidia-persistenced (gpuprov sandbox stand-in) managing $GPU_COUNT simulated GPU(s)," \
    "persistence mode $persistence"
# Detached from the caller's output, as the real daemon is once it forks.
sleep infinity >/dev/null 2>&1 &
