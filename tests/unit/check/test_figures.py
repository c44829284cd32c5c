"""The figures table at the end of `gpuprov check`, and the protocol lines of its jobs never shown."""

from __future__ import annotations

import pytest

from gpuprov import console
from gpuprov.check import bandwidth, figures, output
from gpuprov.check.results import Result, Status

# As a check of two GPU hosts reports them (the fields check's own functions fill in).
GPU_RESULTS = [
    Result("driver-package", "node1", Status.PASS, measured="550.127.08", expected="550.127.08"),
    Result("driver-package", "node2", Status.PASS, measured="550.127.08", expected="550.127.08"),
    Result("cuda", "node1", Status.PASS, measured="12.4.1"),
    Result("cuda", "node2", Status.FAIL, measured="12.2.0", expected="12.4.1", action="re-run bootstrap"),
    Result("torch", "node1", Status.PASS, measured="2.4.1 (CUDA 12.4)"),
    Result("matmul", "node1", Status.PASS, measured="GPU 0: 612.5", unit="TFLOPS (fp16, 16384x16384)"),
    Result("matmul", "node1", Status.PASS, measured="GPU 1: 600", unit="TFLOPS (fp16, 16384x16384)"),
    Result("matmul", "node2", Status.WARN, measured="GPU 0: 300", action="read the clocks check"),
    Result("matmul", "node2", Status.PASS, measured="GPU 1: 610"),
    Result(
        "bandwidth",
        "all 2 hosts",
        Status.PASS,
        measured="171.200 (spread 170.1-172.3)",
        expected=">= 160",
        unit="GB/s busbw",
        source="network: 2 x 400 Gb/s",
        margin="+7%",
    ),
]
# As the sandbox's check reports them: no GPU, gloo on CPU measured but not judged.
SANDBOX_RESULTS = [
    Result("matmul", "node1", Status.NOT_APPLICABLE, detail="no GPU expected"),
    Result(
        "bandwidth",
        "all 2 hosts",
        Status.PASS,
        measured="0.412 (spread 0.390-0.430)",
        unit="GB/s busbw",
        source=bandwidth.FORMULA,
        detail="all-reduce 64 MiB, gloo, 2 ranks, median of 7; no threshold: gloo on CPU is measured, not "
        "judged",
    ),
    Result("python", "node1", Status.PASS, measured="3.11.2"),
    Result("python", "node2", Status.PASS, measured="3.11.2"),
]


def test_gpu_figures() -> None:
    rows = figures.rows(GPU_RESULTS)
    assert rows[0] == [
        "bus bandwidth",
        "all 2 hosts",
        "171.200 (spread 170.1-172.3) GB/s busbw",
        ">= 160 (network: 2 x 400 Gb/s); pass",
    ]
    assert rows[1] == ["matmul TFLOPS", "node1", "median 606.25 (GPUs: 612.5, 600)", "GPUs agree"]
    assert rows[2][:3] == ["matmul TFLOPS", "node2", "median 455 (GPUs: 300, 610)"]
    assert "1 GPU(s) below" in rows[2][3]
    assert ["driver", "all hosts", "550.127.08", ""] in rows
    assert ["CUDA", "node2", "12.2.0", "hosts differ"] in rows
    assert ["torch", "node1", "2.4.1 (CUDA 12.4)", ""] in rows


def test_no_threshold_says_why() -> None:
    rows = figures.rows(SANDBOX_RESULTS)
    assert rows[0][2] == "0.412 (spread 0.390-0.430) GB/s busbw"
    assert rows[0][3] == "none: gloo on CPU is measured, not judged"
    assert ["Python", "all hosts", "3.11.2", ""] in rows
    assert not [r for r in rows if r[0] == "matmul TFLOPS"]  # no GPU: nothing to show


def test_bandwidth_not_measured_says_why() -> None:
    results = [Result("bandwidth", "node1", Status.NOT_APPLICABLE, detail="one host without active NVLink")]
    assert figures.rows(results) == [
        ["bus bandwidth", "node1", "-", "not measured: one host without active NVLink"]
    ]
    assert figures.as_dicts(results)[0]["note"] == "not measured: one host without active NVLink"


def test_check_ends_with_the_figures(capsys: pytest.CaptureFixture[str]) -> None:
    output.show(GPU_RESULTS)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    failure = next(i for i, line in enumerate(lines) if line.startswith("fail"))
    measured = lines.index("Measured:")
    assert failure < measured  # failures and warnings above, the figures last
    assert "bus bandwidth" in lines[measured + 1] and "171.200" in lines[measured + 1]
    assert lines[-1].lstrip().startswith("torch")


@pytest.mark.parametrize("stderr", [False, True])
def test_protocol_lines_are_not_shown(capsys: pytest.CaptureFixture[str], stderr: bool) -> None:
    where = console.job_lines_on_stderr() if stderr else console.protocol_lines_hidden()
    with console.protocol_lines_hidden(bandwidth.MARK), where:
        console.job_line("node1/0 ", 'GPUPROV_ALLREDUCE {"backend": "gloo"}', "white")
        console.job_line("node1/0 ", "RuntimeError: NCCL error", "white")  # the job's real errors show
    console.job_line("node1/0 ", "GPUPROV_ALLREDUCE shown outside", "white")  # a user's own job: as printed
    captured = capsys.readouterr()
    shown = captured.err if stderr else captured.out
    assert "GPUPROV_ALLREDUCE {" not in captured.out + captured.err
    assert "RuntimeError: NCCL error" in shown
    assert "GPUPROV_ALLREDUCE shown outside" in captured.out


def test_a_figure_no_bar_judges_says_could_not_judge_and_why() -> None:
    result = Result(
        "bandwidth",
        "node1",
        Status.WARN,
        measured="20.100 (spread 19.8-20.3)",
        unit="GB/s busbw",
        source=bandwidth.FORMULA,
        detail="all-reduce 1 GiB, nccl, NCCL_ALGO=Ring, 8 ranks, median of 7; could not judge: 8 GPUs, "
        "NVLink between 4 of 28 pairs, PCIe between the others: the all-reduce crosses PCIe",
    )
    [row] = figures.rows([result])
    assert row[:3] == ["bus bandwidth", "node1", "20.100 (spread 19.8-20.3) GB/s busbw"]
    assert row[3].startswith("could not judge: 8 GPUs, NVLink between 4 of 28 pairs")


def test_gpus_below_their_models_floor_do_not_read_as_agreeing() -> None:
    capped = [
        Result(
            "matmul", "node1", Status.FAIL, measured=f"GPU {i}: 400", expected=">= 594.1 (NVIDIA H100 SXM)"
        )
        for i in range(2)
    ]
    [row] = figures.rows(capped)
    assert row[3] == "2 GPU(s) below the model's floor; GPUs agree"
