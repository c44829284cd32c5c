# shellcheck shell=sh  # included by the programs that read the simulated GPUs: see shell.py
# shellcheck disable=SC2034  # the settings are used by those programs, not here
CONF="${GPUPROV_STANDIN_GPUS_CONF:-@CONF@}"
HAVE_GPUS=0
GPU_COUNT=1
GPU_NAME="NVIDIA H100 80GB HBM3"
MEMORY_MIB=81559
COMPUTE_CAP=9.0
NVSWITCH_COUNT=0
PCIE_GEN=5
PCIE_WIDTH=16
REMAP_PENDING_GPUS=""
REMAP_FAILED_GPUS=""
ECC_UNCORRECTABLE_GPUS=""
if [ -r "$CONF" ]; then
    # shellcheck source=/dev/null  # the simulated GPUs, written on the test host
    . "$CONF"
    HAVE_GPUS=1
fi
