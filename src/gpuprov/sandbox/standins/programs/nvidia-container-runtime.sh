#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-container-runtime @VERSION@: with no GPUs to inject it does
# what the real one does for a container that requests none, and hands over to runc.
exec runc "$@"
