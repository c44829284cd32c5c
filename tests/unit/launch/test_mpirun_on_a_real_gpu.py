"""What Open MPI 4.1.6's mpirun printed on a real H100 host, through gpuprov's rank shim (recorded:
tests/recorded/gpu-host-h100/README.md): every line carries the --tag-output tag the printer reads as the
rank, and bench finds rank 0's result line behind it."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuprov.bench import run as bench_run
from gpuprov.launch import stream

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "gpu-host-h100"
LOGS = ["train_ddp-mpirun-openmpi-4.1.6.log", "bench-resnet50-bf16-1xH100-mpirun.log"]


@pytest.mark.parametrize("name", LOGS)
def test_every_line_is_rank_0s(name: str) -> None:
    for line in (RECORDED / name).read_text().splitlines():
        match = stream._RANK_RE.match(line)
        assert match is not None and match.group(2) == "0", line


def test_training_ran_with_nccl_on_the_gpu_and_agreed() -> None:
    text = (RECORDED / "train_ddp-mpirun-openmpi-4.1.6.log").read_text()
    assert "world size 1, backend nccl, device cuda" in text
    assert "all-reduce agreement OK: world 1" in text


def test_bench_reads_the_tagged_result_line(monkeypatch: pytest.MonkeyPatch) -> None:
    log = RECORDED / "bench-resnet50-bf16-1xH100-mpirun.log"
    monkeypatch.setattr(bench_run, "launch", SimpleNamespace(job_log=lambda job, host: log))
    result = bench_run.read_result("job", "vm")
    assert (result["device"], result["backend"]) == ("cuda", "nccl")
    assert result["median_img_s"] == pytest.approx(3465.6, abs=0.1)
    assert json.dumps(result)  # a plain JSON object, as the report takes it
