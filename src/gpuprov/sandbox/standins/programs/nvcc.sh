#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvcc from CUDA @SHORT@: it reports the real version, and compiles
# nothing.
case "$1" in
    --version|-V)
        cat <<'EOF'
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-@YEAR@ NVIDIA Corporation
Built on @BUILT_ON@
Cuda compilation tools, release @SHORT@, V@NVCC_VERSION@
Build cuda_@SHORT@.r@SHORT@/compiler.@BUILD@_0
EOF
        exit 0 ;;
esac
echo "nvcc fatal   : this is a gpuprov sandbox stand-in for nvcc @NVCC_VERSION@; it cannot compile" >&2
exit 1
