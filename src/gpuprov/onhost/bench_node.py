"""The program `gpuprov bench` runs on every process of a job (pushed with models.py; needs torch only).

One DDP training loop on synthetic ImageNet-shaped data (or a DataLoader of generated images in host
memory), timed the same way on every rank:

    warmup steps (discarded)
    per window: [sync, barrier] t0 -- steps -- [sync] t1 -- all-reduce MAX(t1 - t0) (a barrier as well)
    window img/s = world x batch x steps / the slowest rank's time

Rank 0 prints one line `GPUPROV_BENCH_RESULT {json}` that the client reads from the job's log: the windows'
img/s, their median and spread, and what was measured on (GPUs, driver, CUDA, NCCL, torch, interfaces).

With GPUs: NCCL, one process per GPU, channels_last for CNNs, autocast at --precision, cudnn.benchmark.
Without: the same code on the CPU with gloo, a small image, few steps, each process's threads pinned to its
own share of the CPUs, and the result labelled a smoke run (a CPU says nothing about GPU throughput).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import torch  # type: ignore[import-not-found]
import torch.distributed as dist  # type: ignore[import-not-found]
from torch import nn
from torch.nn.parallel import DistributedDataParallel  # type: ignore[import-not-found]
from torch.utils.data import DataLoader, Dataset  # type: ignore[import-not-found]

if __package__:
    from . import bench_models as models
else:  # run as a script on a node: bench_models.py was pushed beside this file as models.py
    import models  # type: ignore[import-not-found,no-redef]

RESULT_MARKER = "GPUPROV_BENCH_RESULT "
SMOKE_LABEL = "CPU smoke run: not a throughput figure"
PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# Without a GPU: what keeps a CPU run to seconds (the method is the same, the numbers mean nothing).
CPU_IMAGE_SIZE = 32
CPU_BATCH_SIZE = 4
CPU_STEPS, CPU_WARMUP, CPU_WINDOWS = 3, 2, 3
GPU_STEPS, GPU_WARMUP, GPU_WINDOWS = 50, 20, 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", choices=sorted(models.MODELS), default="resnet50")
    parser.add_argument("--batch-size", type=int, required=True, help="per process (weak scaling)")
    parser.add_argument("--precision", choices=sorted(PRECISIONS), default="bf16")
    parser.add_argument("--data", choices=("synthetic", "loader"), default="synthetic")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per window")
    parser.add_argument("--warmup", type=int, default=None, help="steps run and discarded first")
    parser.add_argument("--windows", type=int, default=None, help="timed windows")
    parser.add_argument("--image-size", type=int, default=224, help="with GPUs (the CPU uses a small one)")
    parser.add_argument(
        "--workers", type=int, default=4, help="DataLoader workers per process (--data loader)"
    )
    return parser.parse_args(argv)


def pin_cpu_threads(local_rank: int, local_world: int) -> int:
    """Pin each process on a host to its own share of the CPUs, with one torch thread; return the threads.

    One thread: a smoke run measures nothing, and OpenMP threads spinning on cores that other processes
    share (a sandbox's containers) slowed a step 40-fold on the 2-core build machine.
    """
    cpus = sorted(os.sched_getaffinity(0))
    share = max(1, len(cpus) // local_world)
    mine = cpus[local_rank * share : (local_rank + 1) * share] or [cpus[local_rank % len(cpus)]]
    os.sched_setaffinity(0, mine)
    torch.set_num_threads(1)
    return 1


# Not Dataset[tuple[...]]: a base class is evaluated when the class is made, and `tuple[...]` is a TypeError
# before Python 3.9 (PEP 585); torch is Any to mypy here, so the parameter would say nothing to it anyway.
class HostImages(Dataset):
    """Generated uint8 images in host memory; a worker turns each into a normalised float tensor."""

    def __init__(self, count: int, image_size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.images = torch.randint(
            0, 256, (count, 3, image_size, image_size), dtype=torch.uint8, generator=generator
        )
        self.labels = torch.randint(0, models.NUM_CLASSES, (count,), generator=generator)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[index].float().div_(255.0).sub_(0.5).div_(0.25), self.labels[index]


def batches(args: argparse.Namespace, device: torch.device, batch: int, image_size: int, rank: int) -> Any:
    """An endless iterator of (images, labels) on the device."""
    if args.data == "synthetic":  # made on the device once: measures compute and communication only
        x = torch.randn(batch, 3, image_size, image_size, device=device)
        y = torch.randint(0, models.NUM_CLASSES, (batch,), device=device)
        while True:
            yield x, y
    loader = DataLoader(
        HostImages(batch * 4, image_size, seed=rank),
        batch_size=batch,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
        persistent_workers=args.workers > 0,
    )
    while True:
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def host_facts(device: torch.device, threads: int) -> dict[str, Any]:
    """What this host measured on (gathered from every rank, kept once per host)."""
    facts: dict[str, Any] = {
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "interfaces": {
            k: os.environ[k] for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if k in os.environ
        },
        "processes": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
    }
    if device.type == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(device)
        facts["gpu_count"] = torch.cuda.device_count()
        facts["cuda"] = torch.version.cuda
        facts["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
        facts["driver"] = driver_version()
    else:
        facts["cpus"] = os.cpu_count()
        facts["threads_per_process"] = threads
    return facts


def driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            encoding="utf-8",
            errors="replace",  # one byte of another encoding must not cost the run its driver version
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    return lines[0] if out.returncode == 0 and lines else None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    args: argparse.Namespace,
    device: torch.device,
    batch: int,
    image_size: int,
    steps: int,
    warmup: int,
    windows: int,
) -> tuple[list[float], int]:
    """Warmup steps, then the timed windows; the windows' img/s (on every rank) and the model's size."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = models.build(args.model, image_size).to(device)
    memory_format = torch.channels_last if models.is_cnn(args.model) else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    dtype = PRECISIONS[args.precision]
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")
    data = batches(args, device, batch, image_size, rank)

    def train_step() -> None:
        x, y = next(data)
        x = x.contiguous(memory_format=memory_format)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=args.precision != "fp32"):
            loss = loss_fn(ddp(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    for _ in range(warmup):
        train_step()
    if rank == 0:
        print(f"warmup done ({warmup} steps); timing {windows} window(s) of {steps} steps", flush=True)
    rates: list[float] = []
    for window in range(windows):
        sync(device)
        dist.barrier()
        started = time.perf_counter()
        for _ in range(steps):
            train_step()
        sync(device)
        elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64, device=device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank's time; every rank waits here
        rates.append(world * batch * steps / elapsed.item())
        if rank == 0:
            print(f"window {window + 1}/{windows}: {rates[-1]:.1f} img/s", flush=True)

    return rates, models.parameter_count(model)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    print(f"rank {rank}/{world} on {socket.gethostname()}: bench process {os.getpid()}", flush=True)
    threads = 0
    if use_cuda:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
        image_size, batch = args.image_size, args.batch_size
        steps, warmup, windows = GPU_STEPS, GPU_WARMUP, GPU_WINDOWS
    else:
        device = torch.device("cpu")
        threads = pin_cpu_threads(local_rank, local_world)
        image_size, batch = CPU_IMAGE_SIZE, min(args.batch_size, CPU_BATCH_SIZE)
        steps, warmup, windows = CPU_STEPS, CPU_WARMUP, CPU_WINDOWS
    steps = args.steps if args.steps is not None else steps
    warmup = args.warmup if args.warmup is not None else warmup
    windows = args.windows if args.windows is not None else windows

    rates, parameters = measure(args, device, batch, image_size, steps, warmup, windows)
    gc.collect()  # DDP's reducer lets go of the process group before it is destroyed

    facts: list[Any] = [None] * world
    dist.all_gather_object(facts, host_facts(device, threads) if local_rank == 0 else None)
    if rank == 0:
        result = {
            "model": args.model,
            "parameters": parameters,
            "device": device.type,
            "backend": dist.get_backend(),
            "world_size": world,
            "batch_per_process": batch,
            "image_size": image_size,
            "precision": args.precision,
            "data": args.data,
            "workers": args.workers if args.data == "loader" else 0,
            "warmup_steps": warmup,
            "steps_per_window": steps,
            "windows_img_s": rates,
            "median_img_s": statistics.median(rates),
            "min_img_s": min(rates),
            "max_img_s": max(rates),
            "hosts": [f for f in facts if f is not None],
            "label": None if use_cuda else SMOKE_LABEL,
        }
        print(RESULT_MARKER + json.dumps(result), flush=True)
    # Leave together (see examples/train_ddp.py: a gloo rank leaving while a peer is in a collective aborts).
    dist.barrier()
    dist.destroy_process_group()
    return 0


def exit_without_teardown(code: int) -> None:
    """End the process with os._exit once the result is printed and the process group destroyed.

    Python's interpreter teardown can abort a torch rank after its work is done: a gloo or autograd worker
    thread that frees a Python object during Py_FinalizeEx takes the GIL, is unwound by pthread_exit and
    ends in std::terminate ("terminate called without an active exception", SIGABRT), pytorch#117762 and
    pytorch#190489 (a gloo AsyncAllgatherWork among the reported cases; open for torch 2.13). It hit this
    bench's rank 1 once in about 150 sandbox jobs, after the barrier and destroy_process_group; nothing
    the bench needs happens in the teardown.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_teardown(main())
