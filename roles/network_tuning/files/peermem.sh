#!/bin/sh
# Load NVIDIA's GPUDirect RDMA module nvidia_peermem where it can load, and say what happened, as one word
# and a reason: loaded (was already), loaded-now, would-load (check mode), absent, no-peer-memory, failed.
#
# Why check first: nvidia-peermem does its work only when built against the MLNX_OFED / DOCA-OFED
# peer-memory API (ib_register_peer_memory_client, exported by their ib_core); otherwise its init is a bare
# `return -EINVAL` (NVIDIA/open-gpu-kernel-modules, kernel-open/nvidia-peermem/nvidia-peermem.c,
# nv_mem_client_init, `#if defined(NV_MLNX_IB_PEER_MEM_SYMBOLS_PRESENT) ... #else return -EINVAL`). The
# distributions' inbox rdma-core/ib_core has no such symbol, so there modprobe fails with "Invalid argument".
#
# Usage: peermem.sh load|check [kallsyms file] [/sys/module dir]
mode=${1:-load}
kallsyms=${2:-/proc/kallsyms}
sysmodule=${3:-/sys/module}

if [ -d "$sysmodule/nvidia_peermem" ]; then
  echo "loaded nvidia_peermem is loaded"
  exit 0
fi
if ! modinfo -F name nvidia_peermem >/dev/null 2>&1; then
  echo "absent the NVIDIA driver has no nvidia_peermem module for this kernel"
  exit 0
fi
if ! grep -qw ib_register_peer_memory_client "$kallsyms" 2>/dev/null; then
  echo "no-peer-memory the RDMA stack has no peer-memory API (ib_register_peer_memory_client is not in" \
    "$kallsyms: inbox rdma-core, not MLNX_OFED/DOCA-OFED), so nvidia_peermem cannot load"
  exit 0
fi
if [ "$mode" = check ]; then
  echo "would-load the peer-memory API is present"
  exit 0
fi
if error=$(modprobe nvidia_peermem 2>&1); then
  echo "loaded-now nvidia_peermem loaded"
else
  echo "failed modprobe nvidia_peermem: $(echo "$error" | tr '\n' ' ')"
fi
