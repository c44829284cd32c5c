"""The all-reduce `gpuprov check` runs on the hosts through `gpuprov launch` (torchrun starts every rank).

NCCL on GPUs, gloo where there are none. One fixed message size (NCCL_BYTES, GLOO_BYTES), a few untimed
warm-up rounds, then GPUPROV_CHECK_REPEAT timed ones, each ended by a barrier-free synchronize; rank 0 prints
one line `GPUPROV_ALLREDUCE {json}` with every repetition's time. Bus bandwidth follows nccl-tests'
definition (doc/PERFORMANCE.md in NVIDIA/nccl-tests): algbw = bytes / time, busbw = algbw * 2(n-1)/n.
"""

import json
import os
import time

import torch  # type: ignore[import-not-found]  # on the hosts, in the env
import torch.distributed as dist  # type: ignore[import-not-found]

# NCCL reaches its peak bus bandwidth only at large sizes (NVIDIA/nccl-tests#212: "256M is too small to
# reach peak bandwidth"); at 1 GiB published sweeps are within ~7% of their 8 GiB figure (NVIDIA/nccl#2409:
# 216.5 vs 231 GB/s), inside the threshold's margin, at an eighth of the time. gloo on CPU is only
# measured, not judged: 16 MiB keeps it to seconds.
NCCL_BYTES = 1 << 30
GLOO_BYTES = 16 << 20


def main() -> None:
    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    size = NCCL_BYTES if use_cuda else GLOO_BYTES
    repeat = int(os.environ.get("GPUPROV_CHECK_REPEAT", "7"))
    device = torch.device("cuda") if use_cuda else torch.device("cpu")
    tensor = torch.ones(size // 4, dtype=torch.float32, device=device)

    def once() -> float:
        if use_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        if use_cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(2):
        once()
    times = [once() for _ in range(repeat)]
    # Every rank's time counts: the collective is as slow as its slowest rank.
    gathered = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(gathered, op=dist.ReduceOp.MAX)
    if rank == 0:
        report = {"backend": backend, "world": world, "bytes": size, "seconds": gathered.tolist()}
        print("GPUPROV_ALLREDUCE " + json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
