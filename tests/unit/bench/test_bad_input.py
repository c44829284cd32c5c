"""What `gpuprov bench` refuses: one `error:` line, exit code 2, before any host is contacted.

The inventory's hosts are 127.0.0.1 on closed ports: a command that reached for them would fail with
another code (unreachable, 6) and print preflight's progress; none of these gets that far.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpuprov.bench import options, run
from gpuprov.errors import BadInput
from tests.unit.bad_input.commands import real_gpuprov


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\n"
        "node1 ansible_host=127.0.0.1 ansible_port=1 gpuprov_master_addr=192.0.2.1\n"
        "node2 ansible_host=127.0.0.1 ansible_port=2\n"
    )
    return tmp_path


def bench(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return real_gpuprov("bench", str(work / "inventory.ini"), *args, cwd=work)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (
            ["--model", "resnet151"],
            "--model 'resnet151' is not one gpuprov bench has: choose resnet50, vit_b_16",
        ),
        (["--batch-size", "0"], "--batch-size 0 is not valid: give the images per GPU"),
        (["--nodes", "3"], "--nodes 3 is more than the 2 host(s) in"),
        (["--batch-size", "1"], "--batch-size 1: resnet50 needs 2 or more images per GPU"),
        (["--batch-size", "1", "--model", "resnet50"], "batch norm"),
    ],
)
def test_refused_in_one_line_before_any_host(work: Path, args: list[str], text: str) -> None:
    proc = bench(work, *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert text in lines[0]
    assert "Preflight" not in proc.stderr and proc.stdout == ""
    assert not (work / "state" / "jobs").exists()  # no job was recorded


@pytest.mark.parametrize(
    ("given", "text"),
    [
        ({"batch_size": -3}, "--batch-size -3 is not valid"),
        ({"precision": "fp8"}, "--precision 'fp8' is not valid: choose bf16, fp16, fp32"),
        ({"data": "disk"}, "--data 'disk' is not valid: choose synthetic or loader"),
        ({"steps": 0}, "--steps 0 is not valid: give 1 or more"),
        ({"warmup": -1}, "--warmup -1 is not valid: give 0 or more"),
        ({"windows": 0}, "--windows 0 is not valid: give 1 or more"),
        ({"nodes": 0}, "--nodes 0 is not valid: give 1 or more"),
        ({"nodes": 1, "hosts": "node1"}, "--nodes and --hosts exclude each other"),
        ({"hosts": "node1,node1"}, "--hosts names node1 more than once"),
    ],
)
def test_options_refused(given: dict[str, Any], text: str) -> None:
    with pytest.raises(BadInput, match=re.escape(text)):
        options.build(**given)


def test_unknown_host_and_out_file_refused_before_any_host(work: Path) -> None:
    opts = options.build(inventory=str(work / "inventory.ini"), hosts="node1,node9")
    with pytest.raises(BadInput, match="--hosts: node9 not in"):
        run.select_hosts(opts)
    with pytest.raises(BadInput, match="is a file; give a directory"):
        options.build(out=str(work / "inventory.ini"))


@pytest.mark.parametrize("model", sorted(options.DEFAULT_BATCH))
def test_each_model_is_refused_a_batch_it_cannot_train_and_takes_its_smallest(model: str) -> None:
    smallest = options.MIN_BATCH[model]
    assert options.build(model=model, batch_size=smallest).batch_size == smallest
    for batch in range(0, smallest):
        with pytest.raises(BadInput, match=f"--batch-size {batch}"):
            options.build(model=model, batch_size=batch)


def test_defaults_and_what_the_nodes_are_told() -> None:
    opts = options.build(model="vit_b_16", steps=7)
    assert opts.batch_size == options.DEFAULT_BATCH["vit_b_16"]
    assert opts.node_args() == [
        "--model", "vit_b_16", "--batch-size", "128", "--precision", "bf16", "--data", "synthetic",
        "--steps", "7",
    ]  # fmt: skip
