"""The all-reduce `gpuprov check` runs on the hosts through `gpuprov launch` (torchrun starts every rank).

NCCL on GPUs, gloo where there are none. One fixed message size (NCCL_BYTES, GLOO_BYTES), a few untimed
warm-up rounds, then GPUPROV_CHECK_REPEAT timed ones, each ended by a barrier-free synchronize; rank 0 prints
one line `GPUPROV_ALLREDUCE {json}` with every repetition's time. Bus bandwidth follows nccl-tests'
definition (doc/PERFORMANCE.md in NVIDIA/nccl-tests): algbw = bytes / time, busbw = algbw * 2(n-1)/n.

Arguments:
  --ring            NCCL_ALGO=Ring. The thresholds are ring figures; on two hosts NCCL's tree or NVLS can
                    exceed the network's bottleneck, so NVIDIA's advice for network tests is the ring
                    (NVIDIA/nccl-tests#160, #196).
  --rounds SPEC     host pairs instead of all hosts: `0-1,2-3;1-2,3-0` is two rounds, each of disjoint
                    host pairs (host = torchrun's node rank) measured at once in its own process group; the
                    report's "pairs" maps `0-1` to that pair's times.
"""

import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import torch  # type: ignore[import-not-found]  # on the hosts, in the env
import torch.distributed as dist  # type: ignore[import-not-found]

# NCCL reaches its peak bus bandwidth only at large sizes (NVIDIA/nccl-tests#212: "256M is too small to
# reach peak bandwidth"); at 1 GiB published sweeps are within ~7% of their 8 GiB figure (NVIDIA/nccl#2409:
# 216.5 vs 231 GB/s), inside the threshold's margin, at an eighth of the time. gloo on CPU is only
# measured, not judged: 16 MiB keeps it to seconds.
NCCL_BYTES = 1 << 30
GLOO_BYTES = 16 << 20


def parse_rounds(spec: str) -> List[List[Tuple[int, ...]]]:
    """`0-1,2-3;1-2` -> [[(0, 1), (2, 3)], [(1, 2)]]."""
    rounds = []
    for part in filter(None, spec.split(";")):
        rounds.append([tuple(int(h) for h in pair.split("-")) for pair in part.split(",")])
    return rounds


def timed(tensor: Any, use_cuda: bool, repeat: int, group: Optional[Any] = None) -> List[float]:
    """Two untimed rounds, then each timed one's seconds."""

    def once() -> float:
        if use_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        if use_cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(2):
        once()
    return [once() for _ in range(repeat)]


def slowest(times: List[float], device: Any, group: Optional[Any] = None) -> List[float]:
    """Every rank's time counts: the collective is as slow as its slowest rank."""
    gathered = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(gathered, op=dist.ReduceOp.MAX, group=group)
    found: List[float] = gathered.tolist()
    return found


def measure_rounds(
    rounds: List[List[Tuple[int, ...]]], tensor: Any, use_cuda: bool, repeat: int, device: Any
) -> Dict[str, Any]:
    """Each round's pairs at once, rounds one after another; every pair's times, on every rank."""
    world = dist.get_world_size()
    per_host = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    host = int(os.environ.get("GROUP_RANK", str(dist.get_rank() // per_host)))
    # Which host each rank is on (hosts may run different numbers of ranks).
    every = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(every, torch.tensor([host], dtype=torch.int64, device=device))
    host_of = [int(t.item()) for t in every]
    pairs = [pair for in_round in rounds for pair in in_round]
    members = [[r for r in range(world) if host_of[r] in pair] for pair in pairs]
    # new_group is collective: every rank creates every group, in the same order.
    groups = [dist.new_group(ranks) for ranks in members]
    found = torch.zeros(len(pairs), repeat, dtype=torch.float64, device=device)
    index = 0
    for in_round in rounds:
        for pair in in_round:
            if host in pair:
                times = slowest(timed(tensor, use_cuda, repeat, groups[index]), device, groups[index])
                found[index] = torch.tensor(times, dtype=torch.float64, device=device)
            index += 1
        dist.barrier()  # the next round's pairs start when this round's are done
    dist.all_reduce(found, op=dist.ReduceOp.MAX)  # each pair's row from its ranks, zeros elsewhere
    names = ["-".join(str(h) for h in pair) for pair in pairs]
    rows = found.tolist()
    return {
        "pairs": {name: rows[i] for i, name in enumerate(names)},
        "pair_ranks": {name: len(members[i]) for i, name in enumerate(names)},
    }


def main() -> None:
    args = sys.argv[1:]
    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    if use_cuda and "--ring" in args:
        os.environ["NCCL_ALGO"] = "Ring"  # read when the communicators are made, below
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    size = NCCL_BYTES if use_cuda else GLOO_BYTES
    repeat = int(os.environ.get("GPUPROV_CHECK_REPEAT", "7"))
    device = torch.device("cuda") if use_cuda else torch.device("cpu")
    tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
    report: Dict[str, Any] = {
        "backend": backend,
        "world": world,
        "bytes": size,
        "algo": os.environ.get("NCCL_ALGO", ""),
    }
    if "--rounds" in args:
        rounds = parse_rounds(args[args.index("--rounds") + 1])
        report.update(measure_rounds(rounds, tensor, use_cuda, repeat, device))
        report["seconds"] = []
    else:
        report["seconds"] = slowest(timed(tensor, use_cuda, repeat), device)
    if rank == 0:
        print("GPUPROV_ALLREDUCE " + json.dumps(report), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # No interpreter teardown: it can abort a gloo rank after its work is done (pytorch#117762,
    # pytorch#190489; see bench_node.exit_without_teardown).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
