"""A small, real Horovod training run in the shape of Horovod's PyTorch guide (docs/pytorch.rst).

Needs an environment with Horovod built against its PyTorch (python_env with gpu_stack.horovod_version; a
legacy lock: Horovod 0.28.1 builds against PyTorch 2.0.x at most, see docs/horovod.md). Start it with
Horovod's launcher or with Open MPI's:

    horovodrun -np 2 -H node1:1,node2:1 python train_horovod.py --epochs 3
    mpirun -np 2 -H node1:1,node2:1 --bind-to none --map-by slot python train_horovod.py --epochs 3

- hvd.init(); one process per GPU pinned with hvd.local_rank() when the host has GPUs (NCCL), CPU
  otherwise (Gloo or MPI, whichever the launcher set up).
- The same synthetic regression data as train_ddp.py, split across ranks with DistributedSampler
  (num_replicas=hvd.size(), rank=hvd.rank()); the learning rate scaled by hvd.size(), as the guide does.
- hvd.DistributedOptimizer averages the gradients; hvd.broadcast_parameters and
  hvd.broadcast_optimizer_state start every rank from rank 0's state.
- At the end every rank's parameters are compared (allgather of a checksum) and an allreduce of the
  ranks is checked; rank 0 prints the result and the run fails when ranks disagree.
- Rank 0 prints samples/s per epoch (all ranks together), for the scaling table in docs/horovod.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

import horovod
import horovod.torch as hvd
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.01, help="per-process rate; scaled by hvd.size()")
    return parser.parse_args()


def make_dataset(samples: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(1234)  # the same data on every rank
    x = torch.randn(samples, 32, generator=generator)
    true_w = torch.randn(32, 1, generator=generator)
    y = x @ true_w + 0.01 * torch.randn(samples, 1, generator=generator)
    return TensorDataset(x, y)


def agreement(model: nn.Module, device: torch.device) -> bool:
    """Every rank holds the same parameters, and an allreduce of the ranks adds up; rank 0 prints it."""
    checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
    values = hvd.allgather(checksum.to(device), name="checksum").tolist()
    ranks = hvd.allreduce(torch.tensor([float(hvd.rank())], device=device), op=hvd.Sum, name="ranks")
    world = hvd.size()
    expected = world * (world - 1) / 2
    agree = max(values) - min(values) < 1e-9 and ranks.item() == expected
    if hvd.rank() == 0:
        print(
            f"all-reduce agreement {'OK' if agree else 'MISMATCH'}: world {world}, sum of ranks "
            f"{ranks.item():.0f} (expected {expected:.0f}), parameter checksums "
            f"{', '.join(f'{v:.9f}' for v in values)}",
            flush=True,
        )
    return agree


def main() -> int:
    args = parse_args()
    hvd.init()
    use_cuda = torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(hvd.local_rank())
    device = torch.device("cuda", hvd.local_rank()) if use_cuda else torch.device("cpu")
    print(f"rank {hvd.rank()}/{hvd.size()} on {socket.gethostname()}: started", flush=True)
    # A Horovod built without MPI, started by mpirun, finds no Gloo rendezvous and runs each rank as a world
    # of one (horovod/common/gloo/gloo_context.cc, "assuming single process execution"): refuse that.
    launched = next(
        (os.environ[n] for n in ("OMPI_COMM_WORLD_SIZE", "HOROVOD_SIZE") if n in os.environ), None
    )
    if launched is not None and int(launched) != hvd.size():
        print(
            f"train_horovod.py: the launcher started {launched} processes but Horovod sees a world of "
            f"{hvd.size()}: this Horovod lacks the launcher's controller (horovodrun --check-build; built "
            "without MPI?)",
            file=sys.stderr,
            flush=True,
        )
        return 2
    if hvd.rank() == 0:
        controller = "MPI" if hvd.mpi_enabled() else "Gloo" if hvd.gloo_enabled() else "?"
        print(
            f"world size {hvd.size()}, controller {controller}, device {device.type}, "
            f"torch {torch.__version__}, horovod {horovod.__version__}",
            flush=True,
        )
    torch.manual_seed(hvd.rank())  # different starting weights: the broadcast must make them equal

    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    dataset = make_dataset(args.samples)
    sampler = DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True, seed=7)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    loss_fn = nn.MSELoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, batches, seen = torch.zeros(1), 0, 0
        started = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.detach().float().cpu()
            batches += 1
            seen += len(x)
        elapsed = time.perf_counter() - started
        mean = hvd.allreduce(total / max(1, batches), op=hvd.Average, name="loss").item()
        rate = hvd.allreduce(torch.tensor([seen / elapsed]), op=hvd.Sum, name="rate").item()
        if hvd.rank() == 0:
            print(
                f"epoch {epoch}: mean loss {mean:.5f} ({batches} batches per rank), {rate:.0f} samples/s",
                flush=True,
            )

    return 0 if agreement(model, device) else 1


if __name__ == "__main__":
    sys.exit(main())
