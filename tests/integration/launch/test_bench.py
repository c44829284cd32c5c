"""`gpuprov bench` end to end on the 2-node Debian sandbox: the --scaling ladder as real launch jobs on the
CPU (gloo), the files --out writes, and a rank killed mid-bench. Kept small (32 px images, batch 2, fp32:
bf16 autocast on a CPU without bf16 units is emulated and slow, one step per window)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, Sandbox
from tests.integration.launch.conftest import (
    ENV_PATH,
    REPO,
    container,
    docker_exec,
    gp,
    job_processes,
    launch_env,
)
from tests.published_models import IMAGE_SIZE, PUBLISHED_PARAMETERS

pytestmark = pytest.mark.integration

TINY = [
    "--model",
    "resnet50",
    "--precision",
    "fp32",
    "--batch-size",
    "2",
    "--warmup",
    "1",
    "--steps",
    "1",
    "--windows",
    "2",
]
_JOB = re.compile(r"Starting job (\d{8}-\d{6}-[0-9a-f]{4})")


def _assert_nothing_left(sandbox: Sandbox, job_ids: list[str]) -> None:
    for job_id in job_ids:
        for node in ("node1", "node2"):
            left = job_processes(container(sandbox, node), job_id)
            assert left == [], f"{node} still runs processes of job {job_id}: {left}"


def test_scaling_ladder_on_cpu_prints_the_table_and_writes_the_files(
    launch_sandbox: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    began = time.monotonic()
    proc = gp(launch_sandbox, "bench", "--scaling", *TINY, "--out", str(out), timeout=600)
    elapsed = time.monotonic() - began
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)  # docs/bench.md's example comes from this output (pytest -s)
    assert "CPU SMOKE RUN: NOT A THROUGHPUT FIGURE" in proc.stdout
    assert re.search(r"^1 process \(CPU\)\s+1\s+[0-9.]+ .* 1\.00x\s+100%\s+measured$", proc.stdout, re.M)
    assert re.search(r"^2 nodes\s+2\s+[0-9.]+ ", proc.stdout, re.M)
    assert re.search(r"^cross-node factor .*: [0-9.]+x", proc.stdout, re.M)
    assert re.search(r"^1 process \(CPU\) \|#+", proc.stdout, re.M)  # the chart
    assert "GLOO_SOCKET_IFNAME" in proc.stdout or "interfaces not set" in proc.stdout

    doc = json.loads((out / "bench.json").read_text())
    assert doc["label"] == "CPU smoke run: not a throughput figure"
    assert (doc["device"], doc["backend"]) == ("cpu", "gloo")
    assert doc["parameters"] == PUBLISHED_PARAMETERS["resnet50"]
    assert doc["collective_check"] is None or doc["collective_check"]["hosts"] == ["node1", "node2"]
    runs = doc["runs"]
    assert [(r["label"], r["nodes"], r["processes"]) for r in runs] == [
        ("1 process (CPU)", 1, 1),
        ("2 nodes", 2, 2),
    ]
    assert all(len(r["windows_img_s"]) == 2 and r["median_img_s"] > 0 for r in runs)
    base = runs[0]["median_img_s"]
    assert runs[1]["speedup"] == pytest.approx(runs[1]["median_img_s"] / base)
    assert runs[1]["efficiency"] == pytest.approx(runs[1]["speedup"] / 2)
    assert doc["cross_node_factor"] == pytest.approx(runs[1]["median_img_s"] / base)
    assert sorted(h["host"] for h in runs[1]["hosts"]) == ["node1", "node2"]

    assert (out / "bench.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")  # matplotlib: test extra
    rows = list(csv.DictReader((out / "bench.csv").open()))
    assert [(r["label"], r["processes"]) for r in rows] == [("1 process (CPU)", "1"), ("2 nodes", "2")]
    assert float(rows[1]["median_img_s"]) == pytest.approx(runs[1]["median_img_s"])
    _assert_nothing_left(launch_sandbox, [r["job_id"] for r in runs])
    print(f"bench --scaling took {elapsed:.0f} s")


def test_a_rank_killed_mid_bench_fails_the_bench_and_leaves_nothing_running(launch_sandbox: Sandbox) -> None:
    args = ["bench", "--nodes", "2", *TINY[:-4], "--steps", "1000", "--windows", "1"]
    proc = subprocess.Popen(
        [str(BIN / "gpuprov"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=launch_env(launch_sandbox),
    )  # fmt: skip
    assert proc.stdout is not None
    pid, warm = None, False
    deadline = time.monotonic() + 400
    while not (pid and warm) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        found = re.search(r"^node2/1 +\| rank 1/2 on .*: bench process (\d+)", line)
        pid = found.group(1) if found else pid
        warm = warm or "warmup done" in line
    assert pid and warm, "the bench did not reach its timed window"
    killed = docker_exec(container(launch_sandbox, "node2"), "kill", "-KILL", pid)
    assert killed.returncode == 0, killed.stderr
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    job = _JOB.search(err)
    assert job, err
    assert f"error: job {job.group(1)} failed: node2 " in err
    assert "Traceback" not in err.split("error:")[-1]
    _assert_nothing_left(launch_sandbox, [job.group(1)])


def test_parameter_counts_with_the_torch_of_a_bootstrapped_node(launch_sandbox: Sandbox) -> None:
    """The counts the unit test checks where torch is installed here, counted by the torch the python_env
    role put on node1 (CI's venv has none): models.py as bench pushes it, the env's own python."""
    node1 = container(launch_sandbox, "node1")
    models = REPO / "src/gpuprov/onhost/bench_models.py"
    workdir = f"/tmp/gpuprov-test-models-{uuid.uuid4().hex[:6]}"
    assert docker_exec(node1, "mkdir", workdir).returncode == 0
    try:
        copied = subprocess.run(
            ["docker", "cp", str(models), f"{node1}:{workdir}/models.py"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert copied.returncode == 0, copied.stderr
        count = (  # no shell between here and python: the names' quotes stay as written
            f"import json, sys; sys.path.insert(0, {workdir!r}); import models; "
            f"print(json.dumps({{n: models.parameter_count(models.build(n, {IMAGE_SIZE})) "
            f"for n in {sorted(PUBLISHED_PARAMETERS)!r}}}))"
        )
        proc = docker_exec(node1, f"{ENV_PATH}/bin/python", "-c", count)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == PUBLISHED_PARAMETERS
    finally:
        docker_exec(node1, "rm", "-rf", workdir)
