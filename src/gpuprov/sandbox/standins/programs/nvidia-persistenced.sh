#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-persistenced @VERSION@: a shell script, no NVIDIA code.
# Like the real daemon it cannot start without GPUs; with simulated GPUs (@CONF@) it stays in the
# foreground doing nothing until stopped.
. ./gpus-conf.sh

case "$1" in
    -h|--help) echo "nvidia-persistenced (gpuprov sandbox stand-in for version @VERSION@)"; exit 0 ;;
    -v|--version) echo "nvidia-persistenced:  version @VERSION@ (gpuprov sandbox stand-in)"; exit 0 ;;
esac
if [ "$HAVE_GPUS" != 1 ]; then
    echo "nvidia-persistenced failed to initialize: no NVIDIA devices (stand-in; see $CONF)." >&2
    exit 1
fi
echo "nvidia-persistenced (gpuprov sandbox stand-in) managing $GPU_COUNT simulated GPU(s)"
exec sleep infinity
