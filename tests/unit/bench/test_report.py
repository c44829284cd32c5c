"""The results document, table, chart and files of `gpuprov bench`, from runs as node.py reports them."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from gpuprov.bench import references, report
from gpuprov.bench.run import RunResult


def _result(world: int, rates: list[float], hosts: list[dict[str, Any]], gpu: bool) -> dict[str, Any]:
    ordered = sorted(rates)
    return {
        "model": "resnet50",
        "parameters": 25557032,
        "device": "cuda" if gpu else "cpu",
        "backend": "nccl" if gpu else "gloo",
        "world_size": world,
        "batch_per_process": 256 if gpu else 2,
        "image_size": 224 if gpu else 32,
        "precision": "bf16",
        "data": "synthetic",
        "workers": 0,
        "warmup_steps": 20,
        "steps_per_window": 50,
        "windows_img_s": rates,
        "median_img_s": ordered[len(ordered) // 2],
        "min_img_s": ordered[0],
        "max_img_s": ordered[-1],
        "hosts": hosts,
        "label": None if gpu else "CPU smoke run: not a throughput figure",
    }


def _gpu_host(name: str, count: int) -> dict[str, Any]:
    return {
        "host": name, "torch": "2.5.1", "gpu": "NVIDIA A100-SXM4-80GB", "gpu_count": count, "cuda": "12.4",
        "nccl": "2.21.5", "driver": "550.54.15", "interfaces": {"NCCL_SOCKET_IFNAME": "ib0"},
        "processes": count,
    }  # fmt: skip


# A hand-made A100 ladder: 2000 img/s on one GPU, 7600 on 4, 14440 on 8 over 2 nodes.
GPU_RUNS = [
    RunResult("1 GPU", 1, "j1", _result(1, [1990.0, 2000.0, 2010.0], [_gpu_host("a", 4)], True)),
    RunResult("1 node (4 GPUs)", 1, "j2", _result(4, [7600.0, 7500.0, 7700.0], [_gpu_host("a", 4)], True)),
    RunResult(
        "2 nodes",
        2,
        "j3",
        _result(8, [14440.0, 14000.0, 14500.0], [_gpu_host("a", 4), _gpu_host("b", 4)], True),
    ),
]


def test_document_holds_the_arithmetic_and_the_environment() -> None:
    doc = report.document(GPU_RUNS)
    assert doc["label"] is None and doc["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert [r["speedup"] for r in doc["runs"]] == pytest.approx([1.0, 3.8, 7.22])
    assert [r["efficiency"] for r in doc["runs"]] == pytest.approx([1.0, 0.95, 0.9025])
    assert doc["cross_node_factor"] == pytest.approx(14440 / 7600)
    assert doc["runs"][1]["spread"] == pytest.approx(200 / 7600)
    assert {r["source"] for r in doc["references"]} == {ref.source for ref in references.REFERENCES}
    json.dumps(doc, allow_nan=False)  # writable as strict JSON


def test_table_puts_references_beside_the_measured_rows() -> None:
    rows = report.table_rows(report.document(GPU_RUNS))
    assert rows[0][:3] == ["1 GPU", "1", "2000.0"] and rows[0][4:6] == ["1.00x", "100%"]
    assert rows[2][4:6] == ["7.22x", "90%"]
    dle = [r for r in rows if r[0] == "1 A100 GPU, 1 node(s)" and r[2] == "2470"]
    assert dle and "NVIDIA Deep Learning Examples" in dle[0][6] and "batch 256" in dle[0][6]


def test_no_reference_for_another_gpu_or_a_cpu() -> None:
    assert references.for_run("resnet50", "NVIDIA H100 80GB HBM3") == []
    assert references.for_run("resnet50", None) == []
    assert references.for_run("vit_b_16", "NVIDIA A100-PCIE-40GB")


def test_chart_bars_scale_with_throughput_and_dots_show_perfect_scaling() -> None:
    lines = report.chart(report.document(GPU_RUNS))
    # The widest point is perfect scaling on 8 GPUs: 8 x 2000 = 16000 img/s = 40 characters.
    assert lines[0].startswith("1 GPU           |" + "#" * 5 + " " * 35 + "| 2000.0 img/s")
    bars = [line.split("|")[1] for line in lines]
    assert bars[1] == "#" * 19 + "." + " " * 20  # 7600 / 16000 x 40 = 19; perfect: 4 x 2000 -> 20
    assert bars[2] == "#" * 36 + "." * 4  # 14440 / 16000 x 40 = 36.1; perfect: 40


def test_files_json_and_csv(tmp_path: Path) -> None:
    cpu = [
        RunResult(
            "1 process (CPU)", 1, "j1", _result(1, [6.0, 5.0], [{"host": "n1", "torch": "2.13.0+cpu"}], False)
        ),
        RunResult("2 nodes", 2, "j2", _result(2, [9.0, 8.0], [{"host": "n1", "torch": "2.13.0+cpu"}], False)),
    ]
    written = report.write(report.document(cpu), tmp_path / "out")
    has_matplotlib = importlib.util.find_spec("matplotlib") is not None
    assert [p.name for p in written] == ["bench.json", "bench.csv"] + (
        ["bench.png"] if has_matplotlib else []
    )
    doc = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert doc["label"] == "CPU smoke run: not a throughput figure" and doc["references"] == []
    rows = list(csv.DictReader((tmp_path / "out" / "bench.csv").open()))
    assert [r["label"] for r in rows] == ["1 process (CPU)", "2 nodes"]
    assert float(rows[1]["speedup"]) == pytest.approx(9.0 / 6.0)
    assert float(rows[1]["efficiency"]) == pytest.approx(0.75)
    assert rows[1]["model"] == "resnet50" and rows[1]["job_id"] == "j2"


def test_job_lines_leave_stdout_to_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuprov import console

    with console.job_lines_on_stderr():
        console.job_line("node1/0 ", "window 1/2: 5.0 img/s", "white")
    console.job_line("node1/0 ", "after", "white")
    captured = capsys.readouterr()
    assert "window 1/2" in captured.err and "window 1/2" not in captured.out
    assert "after" in captured.out
