"""What `gpuprov check` runs in the env's python where torch sees GPUs: fp16 matmul TFLOPS per GPU.

    python -c <this file's text> N SECONDS [SOAK]

First every GPU multiplies, untimed, for SOAK seconds (a thermal soak: a cold GPU boosts above the clocks it
holds once warm, so a short run reads high: stas00/ml-engineering#59; stable figures need a burn-in of tens
of seconds: soumith/convnet-benchmarks#71). Then the same N x N fp16 matrix multiplication is enqueued on
every GPU at once, timed per GPU with CUDA events.
Large matrices and at most 400 products per GPU keep the enqueueing below CUDA's launch queue depth, so no
GPU waits for another's queue and all are busy together. It prints `busy` while the GPUs still work
(hostprobe then reads nvidia-smi -q: clocks and PCIe link under load), waits for a line on stdin, then
prints one JSON line of TFLOPS per GPU index. Standard library apart from torch; Python 3.6
parses it (see gpuprov.onhost).
"""

import json
import sys
import time
from typing import Any, Dict, List, Tuple

MAX_PRODUCTS = 400  # per GPU: below CUDA's launch queue depth


def arguments(argv: List[str]) -> Tuple[int, float, float]:
    """N (the matrices' size), SECONDS (how long each GPU multiplies, timed), SOAK (untimed, before)."""
    return int(argv[0]), float(argv[1]), float(argv[2]) if len(argv) > 2 else 0.0


def products(seconds: float, once: float) -> int:
    """How many products fill `seconds` when one took `once` seconds (3 to MAX_PRODUCTS)."""
    return min(MAX_PRODUCTS, max(3, int(seconds / once)))


def tflops(n: int, count: int, milliseconds: float) -> float:
    """The rate of `count` N x N products done in `milliseconds` (2 N^3 operations each)."""
    return round(2.0 * n**3 * count / (milliseconds / 1000.0) / 1e12, 2)


def result_line(n: int, rates: Dict[str, float]) -> str:
    return json.dumps({"n": n, "dtype": "float16", "tflops": rates})


def _prepare(torch: Any, n: int, seconds: float) -> List[List[Any]]:
    """Each GPU's matrices, and how many products it runs: one product timed first, after a warm-up."""
    runs = []
    for i in range(torch.cuda.device_count()):
        with torch.cuda.device(i):
            a = torch.randn(n, n, device="cuda", dtype=torch.float16)
            b = torch.randn(n, n, device="cuda", dtype=torch.float16)
            torch.matmul(a, b)
            torch.cuda.synchronize()
            t = time.perf_counter()
            torch.matmul(a, b)
            torch.cuda.synchronize()
            runs.append([i, a, b, products(seconds, max(time.perf_counter() - t, 1e-6))])
    return runs


def _soak(torch: Any, runs: List[List[Any]], seconds: float) -> None:
    """Every GPU multiplies at once, untimed, until `seconds` have passed (a round of each GPU's products,
    then all are waited for, so no queue outgrows CUDA's launch queue)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i, a, b, count in runs:
            with torch.cuda.device(i):
                for _ in range(count):
                    torch.matmul(a, b)
        for run in runs:
            torch.cuda.synchronize(run[0])


def main(argv: List[str]) -> None:
    n, seconds, soak = arguments(argv)
    import torch  # type: ignore[import-not-found]  # the env's, on the host

    runs = _prepare(torch, n, seconds)
    _soak(torch, runs, soak)
    timed = []
    for i, a, b, count in runs:
        with torch.cuda.device(i):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(count):
                torch.matmul(a, b)
            end.record()
            timed.append((i, start, end, count))
    print("busy", flush=True)
    sys.stdin.readline()  # hostprobe has read nvidia-smi
    rates = {}
    for i, start, end, count in timed:
        end.synchronize()
        rates[str(i)] = tflops(n, count, start.elapsed_time(end))
    print(result_line(n, rates), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
