#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-container-cli @VERSION@ (libnvidia-container-tools): a shell
# script, no NVIDIA code. Implemented: --version; with no GPUs and no driver there is nothing else to do.
case "$1" in
    --version|-V)
        echo "cli-version: @VERSION@"
        echo "lib-version: @VERSION@"
        exit 0 ;;
esac
echo "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object file: no such file or directory" >&2
exit 1
