"""The results document, table, chart and files of `gpuprov bench`, from runs as node.py reports them."""

from __future__ import annotations

import csv
import json
import sys
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
        "host": name, "torch": "2.5.1", "gpu": "NVIDIA A100-SXM4-40GB", "gpu_count": count, "cuda": "12.4",
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
    assert doc["label"] is None and doc["gpu"] == "NVIDIA A100-SXM4-40GB"
    assert [r["speedup"] for r in doc["runs"]] == pytest.approx([1.0, 3.8, 7.22])
    assert [r["efficiency"] for r in doc["runs"]] == pytest.approx([1.0, 0.95, 0.9025])
    assert doc["cross_node_factor"] == pytest.approx(14440 / 7600)
    assert doc["runs"][1]["spread"] == pytest.approx(200 / 7600)
    # bf16, synthetic data on an A100-SXM4-40GB: FlagPerf's bf16 compute-only row, not its fp32 ones
    assert [(r["gpus"], r["img_s"], r["precision"], r["data"]) for r in doc["references"]] == [
        (8, 9818, "bf16", "compute only"),
    ]
    json.dumps(doc, allow_nan=False)  # writable as strict JSON


def test_table_puts_references_beside_the_measured_rows() -> None:
    rows = report.table_rows(report.document(GPU_RUNS))
    assert rows[0][:3] == ["1 GPU", "1", "2000.0"] and rows[0][4:6] == ["1.00x", "100%"]
    assert rows[2][4:6] == ["7.22x", "90%"]
    flagperf = [r for r in rows if r[0] == "8 A100-SXM4-40GB GPUs, 1 node(s)" and r[2] == "9818"]
    assert flagperf and "FlagPerf" in flagperf[0][6] and "batch 512" in flagperf[0][6]
    assert flagperf[0][6].endswith("(bf16, compute only)")


def test_references_match_the_exact_gpu_model_precision_and_data_method() -> None:
    fp32 = references.for_run("resnet50", "NVIDIA A100-SXM4-40GB", "fp32", "synthetic")
    assert [(r.gpus, r.nodes, r.img_s) for r in fp32] == [(1, 1, 799), (8, 1, 6105), (16, 2, 11874)]
    # FlagPerf's "amp" row is left out: its README does not say it ran fp16 (bf16 is its 16-bit format)
    assert references.for_run("resnet50", "NVIDIA A100-SXM4-40GB", "fp16", "synthetic") == []
    # another A100 model (PCIe: 250 W; the 80GB SXM4), another data method, another GPU: nothing
    assert references.for_run("resnet50", "NVIDIA A100-PCIE-40GB", "fp32", "synthetic") == []
    assert references.for_run("resnet50", "NVIDIA A100-SXM4-80GB", "fp32", "synthetic") == []
    assert references.for_run("resnet50", "NVIDIA A100-SXM4-40GB", "fp32", "loader") == []
    assert references.for_run("resnet50", "NVIDIA H100 80GB HBM3", "bf16", "synthetic") == []  # none read
    assert references.for_run("resnet50", None, "bf16", "synthetic") == []
    assert references.for_run("vit_b_16", "NVIDIA A100-SXM4-40GB", "bf16", "synthetic") == []


def test_gpu_model_is_the_name_less_its_vendor_prefix() -> None:
    assert references.gpu_model("NVIDIA A100-SXM4-40GB") == "A100-SXM4-40GB"
    assert references.gpu_model("Tesla V100-SXM2-16GB") == "V100-SXM2-16GB"
    assert references.gpu_model("NVIDIA_A100-SXM4-40GB") == "A100-SXM4-40GB"  # FlagPerf's spelling
    assert references.gpu_model("NVIDIA H100 80GB HBM3") == "H100 80GB HBM3"


def test_every_reference_names_a_pinned_source_and_its_method() -> None:
    for ref in references.REFERENCES:
        assert "https://github.com/" in ref.source and "/blob/" in ref.source, ref
        assert ref.precision in ("bf16", "fp16", "fp32") and "batch" in ref.method, ref
        assert ref.data in references.DATA_METHOD.values(), ref


def test_chart_bars_scale_with_throughput_and_dots_show_perfect_scaling() -> None:
    lines = report.chart(report.document(GPU_RUNS))
    # The widest point is perfect scaling on 8 GPUs: 8 x 2000 = 16000 img/s = 40 characters.
    assert lines[0].startswith("1 GPU           |" + "#" * 5 + " " * 35 + "| 2000.0 img/s")
    bars = [line.split("|")[1] for line in lines]
    assert bars[1] == "#" * 19 + "." + " " * 20  # 7600 / 16000 x 40 = 19; perfect: 4 x 2000 -> 20
    assert bars[2] == "#" * 36 + "." * 4  # 14440 / 16000 x 40 = 36.1; perfect: 40


CPU_RUNS = [
    RunResult(
        "1 process (CPU)", 1, "j1", _result(1, [6.0, 5.0], [{"host": "n1", "torch": "2.13.0+cpu"}], False)
    ),
    RunResult("2 nodes", 2, "j2", _result(2, [9.0, 8.0], [{"host": "n1", "torch": "2.13.0+cpu"}], False)),
]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_files_json_and_csv(tmp_path: Path) -> None:
    written = report.write(report.document(CPU_RUNS), tmp_path / "out")
    assert [p.name for p in written] == ["bench.json", "bench.csv", "bench.png"]  # matplotlib: test extra
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


def test_out_writes_a_png_of_the_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.pyplot as plt

    drawn = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (drawn.append(fig), close(fig)))
    written = report.write(report.document(GPU_RUNS), tmp_path)
    png = (tmp_path / "bench.png").read_bytes()
    assert written[-1] == tmp_path / "bench.png" and png.startswith(PNG_SIGNATURE)
    assert png[12:16] == b"IHDR" and (int.from_bytes(png[16:20]), int.from_bytes(png[20:24])) == (600, 400)
    (ax,) = drawn[0].axes
    measured, perfect = ax.lines
    assert list(measured.get_xdata()) == [1, 4, 8]
    assert list(measured.get_ydata()) == [2000.0, 7600.0, 14440.0]
    assert list(perfect.get_ydata()) == [2000.0, 8000.0, 16000.0]
    assert [t.get_text() for t in ax.texts] == ["1 GPU", "1 node (4 GPUs)", "2 nodes"]


def test_without_matplotlib_the_png_is_skipped_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    written = report.write(report.document(CPU_RUNS), tmp_path)
    assert [p.name for p in written] == ["bench.json", "bench.csv"]
    assert not (tmp_path / "bench.png").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"{tmp_path / 'bench.png'} not written: matplotlib is not installed (pip install 'gpuprov[plot]')"
    ]


def test_the_result_line_is_not_shown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """node.py's `GPUPROV_BENCH_RESULT {json}` is read from the job's log, never printed with its lines."""
    from types import SimpleNamespace

    from gpuprov import console
    from gpuprov.bench import run

    def job(*args: object, **kwargs: object) -> str:
        console.job_line("node1/0 ", 'GPUPROV_BENCH_RESULT {"world_size": 1}', "white")
        console.job_line("node1/0 ", "window 1/2: 5.0 img/s", "white")
        return "j1"

    monkeypatch.setattr(run.launch, "run_job", job)
    monkeypatch.setattr(run, "read_result", lambda job_id, master: {"world_size": 1})
    opts = SimpleNamespace(node_args=lambda: [], launcher="torchrun", image=None)
    result = run.one_run(opts, Path("inv.ini"), Path("/tmp/node.py"), ["node1"], run.Nproc("1"), "1 node")  # type: ignore[arg-type]
    captured = capsys.readouterr()
    assert result.job_id == "j1" and "window 1/2" in captured.out
    assert "GPUPROV_BENCH_RESULT" not in captured.out + captured.err
