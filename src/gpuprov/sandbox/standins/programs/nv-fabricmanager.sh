#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nv-fabricmanager @VERSION@: a shell script, no NVIDIA code.
# Fabric manager only runs on NVSwitch systems: it starts when @CONF@ sets NVSWITCH_COUNT above 0.
. ./gpus-conf.sh

case "$1" in
    -h|--help) echo "nv-fabricmanager (gpuprov sandbox stand-in for version @VERSION@)"; exit 0 ;;
    -v|--version) echo "Fabric Manager version is : @VERSION@"; exit 0 ;;
esac
if [ "$HAVE_GPUS" != 1 ] || [ "$NVSWITCH_COUNT" -lt 1 ]; then
    echo "NVIDIA Fabric Manager (stand-in): no NVSwitch devices found (NVSWITCH_COUNT in $CONF)." >&2
    exit 1
fi
echo "NVIDIA Fabric Manager (gpuprov sandbox stand-in) managing $NVSWITCH_COUNT simulated NVSwitch(es)"
exec sleep infinity
