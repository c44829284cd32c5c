#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nv-hostengine (DCGM @VERSION@): stays in the foreground, does nothing.
case "$1" in
    --version|-v) echo "nv-hostengine version: @VERSION@ (gpuprov sandbox stand-in)"; exit 0 ;;
esac
exec sleep infinity
