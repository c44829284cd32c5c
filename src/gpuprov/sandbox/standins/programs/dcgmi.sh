#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's dcgmi @VERSION@: a shell script, no NVIDIA code.
. ./gpus-conf.sh

case "$1 $2" in
    "--version "*|"-v "*) echo "dcgmi  version: @VERSION@"; exit 0 ;;
    "discovery -l")
        [ "$HAVE_GPUS" = 1 ] || GPU_COUNT=0
        echo "$GPU_COUNT GPU(s) found."
        i=0
        while [ "$i" -lt "$GPU_COUNT" ]; do
            echo "GPU ID: $i  Name: $GPU_NAME"
            i=$((i + 1))
        done
        exit 0 ;;
esac
echo "dcgmi (gpuprov sandbox stand-in) implements only --version and 'discovery -l'" >&2
exit 1
