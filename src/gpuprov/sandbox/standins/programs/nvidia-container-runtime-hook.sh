#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-container-runtime-hook @VERSION@: there are no GPUs to inject.
exit 0
