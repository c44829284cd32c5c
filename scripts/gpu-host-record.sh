#!/bin/bash
# Record a real GPU host for tests/recorded/ (see tests/recorded/gpu-host-h100/README.md):
#   scripts/gpu-host-record.sh prepare        here, with the venv: writes .gpucheck/ (ignored by git): check's
#                                             host program as it is sent, its request, bench's node program
#   scripts/gpu-host-record.sh record OUTDIR  on the GPU host, from the repository root (python3 = the torch
#                                             env): the tools' outputs and the programs' results, in OUTDIR/r
set -u
cd "$(dirname "$0")/.."
case "${1:-}" in
prepare)
    mkdir -p .gpucheck/bench
    .venv/bin/python - <<'PY'
import json
from gpuprov import onhost
open(".gpucheck/hostprobe.py", "w").write(onhost.program("hostprobe.py"))
request = {
    "python": "python3",
    "sysctl_keys": ["net.core.rmem_max", "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"],
    "nccl_conf": "/etc/nccl.conf",
    "cuda_home": "/usr/local/cuda",
    "programs": {n: onhost.text(f"{n}.py") for n in ("env_probe", "matmul_probe")},
}
json.dump(request, open(".gpucheck/request.json", "w"))
PY
    cp src/gpuprov/onhost/bench_node.py .gpucheck/bench/node.py
    cp src/gpuprov/onhost/bench_models.py .gpucheck/bench/models.py
    ;;
record)
    R=${2:?an output directory}/r
    mkdir -p "$R"
    exec > >(tee "$R/run.log") 2>&1
    date -u; uname -a; python3 --version; head -3 /etc/os-release
    nvidia-smi > "$R/summary" 2>&1; echo "summary rc=$?"
    nvidia-smi -q > "$R/query-full" 2>&1
    nvidia-smi -L > "$R/list" 2>&1
    nvidia-smi topo -m > "$R/topo-m" 2>&1; echo "topo rc=$?"
    nvidia-smi nvlink --status > "$R/nvlink-status" 2>&1; echo "nvlink rc=$?"
    nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,power.limit,clocks.max.sm,pcie.link.gen.max,pcie.link.width.max \
        --format=csv > "$R/csv" 2>&1
    cat /proc/driver/nvidia/version > "$R/proc-version" 2>&1
    for t in nvidia-ctk nvidia-container-cli docker podman enroot ibstat ibv_devinfo mpirun dcgmi nv-fabricmanager; do
        printf '%s ' "$t"; command -v "$t" || echo missing
    done > "$R/tools"
    python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.get_device_name(0))' \
        > "$R/torch" 2>&1
    timeout 240 python3 .gpucheck/hostprobe.py collect < .gpucheck/request.json > "$R/collect.json"; echo "collect rc=$?"
    NCCL_DEBUG=INFO GPUPROV_CHECK_REPEAT=5 timeout 120 torchrun --standalone --nproc-per-node 1 \
        src/gpuprov/onhost/allreduce.py > "$R/allreduce-nccl-info.log" 2>&1; echo "allreduce rc=$?"
    (cd .gpucheck/bench && timeout 200 torchrun --standalone --nproc-per-node 1 node.py --model resnet50 \
        --batch-size 128 --precision bf16 --windows 3 > "$R/bench-resnet50.log" 2>&1; echo "bench rc=$?")
    ;;
*)
    echo "usage: $0 prepare | record OUTDIR" >&2
    exit 2
    ;;
esac
