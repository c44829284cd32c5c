"""What `gpuprov bench` shows and writes: a table, a terminal chart, JSON, CSV and (with matplotlib) a PNG."""

from __future__ import annotations

import csv
import importlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuprov import console
from gpuprov.errors import GpuprovError

from . import check_record, references, scaling

if TYPE_CHECKING:  # run imports the launch flow (paramiko): not needed to draw a report
    from .run import RunResult

METHOD = (
    "DDP, one process per GPU (one per host without GPUs); weak scaling at a fixed per-process batch; "
    "channels_last for CNNs; autocast at the chosen precision; cudnn.benchmark; warmup steps discarded; "
    "then timed windows, each opened by a device sync and a barrier and closed by a device sync and an "
    "all-reduce of the ranks' times: window img/s = all images of the window / the slowest rank's time; "
    "the median of the windows is reported with their min and max"
)
CSV_COLUMNS = [
    "label", "nodes", "processes", "median_img_s", "min_img_s", "max_img_s", "spread", "speedup",
    "efficiency", "model", "precision", "batch_per_process", "image_size", "data", "device", "job_id",
]  # fmt: skip
CHART_WIDTH = 40


def rungs(runs: list[RunResult]) -> list[scaling.Rung]:
    return [
        scaling.Rung(
            r.label,
            r.nodes,
            r.processes,
            float(r.result["median_img_s"]),
            float(r.result["min_img_s"]),
            float(r.result["max_img_s"]),
        )
        for r in runs
    ]


def _gpu_name(runs: list[RunResult]) -> str | None:
    for run in runs:
        for host in run.result.get("hosts", []):
            if host.get("gpu"):
                return str(host["gpu"])
    return None


def document(runs: list[RunResult], collective_check: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything measured, how, and on what, as one JSON-ready dict; collective_check is the busbw
    `gpuprov check` measured on the same hosts (check_record.find), if it did."""
    first = runs[0].result
    scaled = scaling.scale(rungs(runs))
    rows = []
    for run, row in zip(runs, scaled, strict=True):
        rows.append(
            {
                "label": run.label,
                "nodes": run.nodes,
                "processes": run.processes,
                "job_id": run.job_id,
                "median_img_s": row.rung.img_s,
                "min_img_s": row.rung.img_s_min,
                "max_img_s": row.rung.img_s_max,
                "spread": scaling.spread(row.rung),
                "speedup": row.speedup,
                "efficiency": row.efficiency,
                "windows_img_s": run.result["windows_img_s"],
                "hosts": run.result.get("hosts", []),
            }
        )
    gpu = _gpu_name(runs)
    return {
        "label": first.get("label"),
        "method": METHOD,
        "model": first["model"],
        "parameters": first.get("parameters"),
        "device": first["device"],
        "backend": first.get("backend"),
        "precision": first["precision"],
        "batch_per_process": first["batch_per_process"],
        "image_size": first["image_size"],
        "data": first["data"],
        "workers": first.get("workers", 0),
        "warmup_steps": first.get("warmup_steps"),
        "steps_per_window": first.get("steps_per_window"),
        "windows": len(first["windows_img_s"]),
        "gpu": gpu,
        "runs": rows,
        "cross_node_factor": scaling.cross_node_factor([r.rung for r in scaled]),
        "collective_check": collective_check,
        "references": [
            {
                "gpus": ref.gpus,
                "nodes": ref.nodes,
                "img_s": ref.img_s,
                "gpu": ref.gpu,
                "precision": ref.precision,
                "data": ref.data,
                "source": ref.source,
                "method": ref.method,
            }
            for ref in references.for_run(first["model"], gpu, first["precision"], first["data"])
        ],
    }


def _num(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def table_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = [
        [
            row["label"],
            str(row["processes"]),
            _num(row["median_img_s"], 1),
            f"{row['min_img_s']:.1f}-{row['max_img_s']:.1f} ({row['spread'] * 100:.0f}%)",
            _num(row["speedup"], 2, "x"),
            _num(None if row["efficiency"] is None else row["efficiency"] * 100, 0, "%"),
            "measured",
        ]
        for row in doc["runs"]
    ]
    for ref in doc["references"]:
        where = f"{ref['gpus']} {ref['gpu']} GPU{'s' if ref['gpus'] > 1 else ''}, {ref['nodes']} node(s)"
        rows.append(
            [
                where,
                str(ref["gpus"]),
                _num(ref["img_s"], 0),
                "",
                "",
                "",
                f"{ref['source']}: {ref['method']} ({ref['precision']}, {ref['data']})",
            ]
        )
    return rows


def chart(doc: dict[str, Any]) -> list[str]:
    """Bars of img/s per run; '.' extends a bar to where perfect scaling from 1 process would put it."""
    runs = doc["runs"]
    base = next((r["median_img_s"] for r in runs if r["processes"] == 1), None)
    ideal = {r["label"]: base * r["processes"] if base else r["median_img_s"] for r in runs}
    top = max([r["median_img_s"] for r in runs] + list(ideal.values())) or 1.0
    width = max(len(r["label"]) for r in runs)
    lines = []
    for r in runs:
        bar = round(CHART_WIDTH * r["median_img_s"] / top)
        dots = max(0, round(CHART_WIDTH * ideal[r["label"]] / top) - bar)
        pad = " " * (CHART_WIDTH - bar - dots)
        lines.append(
            f"{r['label'].ljust(width)} |{'#' * bar}{'.' * dots}{pad}| {r['median_img_s']:.1f} img/s"
        )
    return lines


def show(doc: dict[str, Any]) -> None:
    """The table and the chart on stdout: what the command was asked for."""
    what = (
        f"{doc['model']}, {doc['precision']}, batch {doc['batch_per_process']} per process, "
        f"image {doc['image_size']}px, {doc['data']} data, {doc['windows']} windows of "
        f"{doc['steps_per_window']} steps after {doc['warmup_steps']} warmup"
    )
    if doc["label"]:
        console.result(f"{doc['label'].upper()}")
    console.result(f"gpuprov bench: {what}")
    columns = [
        "run",
        "processes",
        "img/s (median)",
        "windows min-max (spread)",
        "speedup",
        "efficiency",
        "source",
    ]
    out = io.StringIO()
    widths = [max(len(c), *(len(row[i]) for row in table_rows(doc))) for i, c in enumerate(columns)]
    for cells in [columns, *table_rows(doc)]:
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip() + "\n")
    console.result(out.getvalue().rstrip("\n"))
    factor = doc["cross_node_factor"]
    if factor is not None:
        console.result(f"cross-node factor (img/s on 2 nodes / on 1 node): {factor:.2f}x (2.00x is perfect)")
    console.result("\n".join(chart(doc)))
    console.result(f"on: {environment_line(doc)}")
    console.result(check_record.line(doc["collective_check"]))
    console.result(f"method: {doc['method']}")


def environment_line(doc: dict[str, Any]) -> str:
    """The largest run's hosts: GPUs, driver, CUDA, NCCL, torch, interfaces (or CPUs and threads)."""
    parts = []
    for host in doc["runs"][-1]["hosts"]:
        if host.get("gpu"):
            what = (
                f"{host['gpu_count']}x {host['gpu']}, driver {host.get('driver')}, CUDA {host.get('cuda')}, "
                f"NCCL {host.get('nccl')}"
            )
        else:
            what = f"CPU, {host.get('threads_per_process')} thread(s) per process of {host.get('cpus')}"
        ifaces = ", ".join(f"{k}={v}" for k, v in host.get("interfaces", {}).items()) or "interfaces not set"
        parts.append(f"{host['host']}: {what}, torch {host['torch']}, {ifaces}")
    return "; ".join(parts)


def csv_text(doc: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in doc["runs"]:
        values = {**doc, **row}
        writer.writerow(["" if values.get(c) is None else values[c] for c in CSV_COLUMNS])
    return out.getvalue()


def write(doc: dict[str, Any], out: Path) -> list[Path]:
    """bench.json, bench.csv and, where matplotlib is installed, bench.png in out; the paths written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = [out / "bench.json", out / "bench.csv"]
        written[0].write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
        written[1].write_text(csv_text(doc))
    except OSError as exc:
        raise GpuprovError(f"--out {out}: cannot write the results: {exc.strerror or exc}") from None
    try:
        png = plot(doc, out / "bench.png")
    except OSError as exc:  # checked before the run (bench/options.py); the disk may have filled since
        raise GpuprovError(f"--out {out}: cannot write bench.png: {exc.strerror or exc}") from None
    if png is None:
        console.info(
            f"{out / 'bench.png'} not written: matplotlib is not installed (pip install 'gpuprov[plot]')"
        )
        return written
    return [*written, png]


def plot(doc: dict[str, Any], path: Path) -> Path | None:
    """img/s against processes with the line of perfect scaling; None without matplotlib."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        return None
    matplotlib.use("Agg")  # no display needed
    plt = importlib.import_module("matplotlib.pyplot")
    runs = doc["runs"]
    x = [r["processes"] for r in runs]
    y = [r["median_img_s"] for r in runs]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(x, y, "o-", label="measured (median)")
    base = next((r["median_img_s"] for r in runs if r["processes"] == 1), None)
    if base:
        ax.plot(x, [base * p for p in x], "--", label="perfect scaling")
    for r in runs:
        ax.annotate(r["label"], (r["processes"], r["median_img_s"]), fontsize=8)
    ax.set_xlabel("processes")
    ax.set_ylabel("img/s")
    ax.set_title(f"{doc['model']} {doc['precision']}" + (f" - {doc['label']}" if doc["label"] else ""))
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
