"""Run node.py through `gpuprov launch` once per rung of the ladder, and read each run's result.

Every run is an ordinary launch job (preflight, push, live logs, fail-fast teardown, a job record); rank 0
prints its result as one marked line, which this reads back from the master host's job log.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprov import console, hosts, onhost
from gpuprov.errors import GpuprovError
from gpuprov.launch import api as launch
from gpuprov.launch.api import Nproc

from .options import BenchOptions

# The marker node.py prints its result after (onhost.bench_node.RESULT_MARKER; it needs torch: not imported).
RESULT_MARKER = "GPUPROV_BENCH_RESULT "
# What a node needs beside torch: each host file under the name the program has in the job.
PROGRAM = {"node.py": "bench_node.py", "models.py": "bench_models.py"}


@dataclass(frozen=True)
class RunResult:
    label: str
    nodes: int
    job_id: str
    result: dict[str, Any]  # node.py's JSON
    host_names: tuple[str, ...] = ()  # the inventory names of the hosts it ran on

    @property
    def processes(self) -> int:
        return int(self.result["world_size"])


def select_hosts(opts: BenchOptions) -> tuple[Path, list[hosts.Host]]:
    """The inventory and the hosts; BadInput (unknown host, --nodes past the inventory) before any SSH."""
    inventory, chosen = launch.choose_hosts(opts)
    return inventory.path, chosen


def stage_program(into: Path) -> Path:
    """Copy the on-node program into a directory to push as the job's --workdir; return node.py's path."""
    for name, source in PROGRAM.items():
        shutil.copyfile(onhost.path(source), into / name)
    return into / "node.py"


def read_result(job_id: str, master: str) -> dict[str, Any]:
    """Rank 0's result line from the master's log of the job (the last one, should a rank restart)."""
    log = launch.job_log(job_id, master)
    found = None
    with log.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            at = line.find(RESULT_MARKER)
            if at >= 0:
                found = line[at + len(RESULT_MARKER) :]
    if found is None:
        raise GpuprovError(f"job {job_id} ended without a result line from rank 0 (log: {log})")
    try:
        data = json.loads(found)
    except ValueError:
        raise GpuprovError(f"job {job_id}: rank 0's result line is not JSON (log: {log})") from None
    if not isinstance(data, dict):
        raise GpuprovError(f"job {job_id}: rank 0's result line is not a JSON object (log: {log})")
    return data


def one_run(
    opts: BenchOptions, inventory: Path, script: Path, names: list[str], nproc: Nproc, label: str
) -> RunResult:
    console.step(f"bench: {label} on {', '.join(names)}")
    with console.protocol_lines_hidden(RESULT_MARKER):  # read from the log by read_result, never shown
        job_id = launch.run_job(
            script,
            inventory,
            names,
            nproc=nproc,
            script_args=opts.node_args(),
            workdir=script.parent,
            launcher=opts.launcher,
            image=opts.image,
        )
    return RunResult(label, len(names), job_id, read_result(job_id, names[0]), tuple(names))


def _gpus(result: dict[str, Any]) -> int:
    return int(result["hosts"][0].get("gpu_count") or 0) if result.get("hosts") else 0


def run_all(opts: BenchOptions) -> list[RunResult]:
    """The runs: the selected hosts once, or with --scaling 1 GPU, 1 node, then 2..N nodes."""
    inventory, selected = select_hosts(opts)
    names = [h.name for h in selected]
    with tempfile.TemporaryDirectory(prefix="gpuprov-bench-") as tmp:
        script = stage_program(Path(tmp))
        if not opts.scaling:
            label = f"{len(names)} node{'s' if len(names) > 1 else ''}"
            return [one_run(opts, inventory, script, names, Nproc("auto"), label)]
        first = one_run(opts, inventory, script, names[:1], Nproc("count", 1), "1 process")
        gpus = _gpus(first.result)
        runs = [dataclasses.replace(first, label="1 GPU" if gpus else "1 process (CPU)")]
        if gpus > 1:  # without GPUs (one process per host) or with one GPU, this is the run above
            runs.append(one_run(opts, inventory, script, names[:1], Nproc("auto"), f"1 node ({gpus} GPUs)"))
        for count in range(2, len(names) + 1):
            runs.append(one_run(opts, inventory, script, names[:count], Nproc("auto"), f"{count} nodes"))
        return runs
