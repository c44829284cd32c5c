"""The stand-in nvidia-smi against recorded output of the real one (tests/recorded/nvidia-smi/).

The stand-in runs configured like the recorded machine; what must agree is the layout (header lines,
column borders, where each value starts or ends), not the live values (temperatures, power, usage).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from gpuprov.sandbox.standins.catalogue import DriverRelease
from gpuprov.sandbox.standins.drivers import _nvidia_smi

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-smi"
PM_STATE = "/run/gpuprov-standin/persistence-mode"


def stand_in(tmp_path: Path, driver: DriverRelease, conf: str, persistence: bool) -> Path:
    # The persistence-mode state file moves under tmp_path so the test can switch it without root.
    state = tmp_path / "persistence-mode"
    if persistence:
        state.touch()
    script = _nvidia_smi(driver).content.decode()
    assert f"PM_STATE={PM_STATE}\n" in script
    tool = tmp_path / "nvidia-smi"
    tool.write_text(script.replace(f"PM_STATE={PM_STATE}\n", f"PM_STATE={state}\n"))
    tool.chmod(0o755)
    (tmp_path / "gpus.conf").write_text(conf)
    return tool


def run(tool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUPROV_STANDIN_GPUS_CONF": str(tool.parent / "gpus.conf")}
    return subprocess.run([str(tool), *args], capture_output=True, text=True, env=env, check=False)


def tokens(line: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", line)]


def same_layout(real: str, ours: str) -> bool:
    """Same borders, and every value starts (left-aligned) or ends (right-aligned) where the real one does."""
    if len(real) != len(ours) or [i for i, c in enumerate(real) if c in "|+"] != [
        i for i, c in enumerate(ours) if c in "|+"
    ]:
        return False
    a, b = tokens(real), tokens(ours)
    return len(a) == len(b) and all(x[0] == y[0] or x[1] == y[1] for x, y in zip(a, b, strict=True))


def test_summary_table_has_the_layout_of_an_8x_h100_on_550(tmp_path: Path) -> None:
    recorded = (RECORDED / "summary-8xH100-550.90.07").read_text().splitlines()
    tool = stand_in(
        tmp_path,
        DriverRelease(branch="550", version="550.90.07", cuda="12.4"),
        'GPU_COUNT=8\nGPU_NAME="NVIDIA H100 80GB HBM3"\nMEMORY_MIB=81559\n',
        persistence=True,
    )
    proc = run(tool)
    assert proc.returncode == 0, proc.stderr
    ours = proc.stdout.splitlines()

    # The timestamp line: same date format, same trailing padding.
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", recorded[0].rstrip())
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", ours[0].rstrip())
    assert len(ours[0]) == len(recorded[0])

    # Header (driver, CUDA, column titles) byte for byte: same driver and CUDA as the recording.
    assert ours[1:8] == recorded[1:8]

    # One block of four lines per GPU, each line laid out like the recorded ones.
    gpu_rows = [line for line in ours[8:] if line.startswith(("|", "+"))][: 8 * 4]
    assert len(gpu_rows) == 32
    for n in range(8):
        block, real = gpu_rows[4 * n : 4 * n + 4], recorded[8:12]
        for real_line, our_line in zip(real, block, strict=True):
            assert same_layout(real_line, our_line), f"GPU {n}:\n{real_line}\n{our_line}"
        assert block[0].startswith(f"|   {n}  NVIDIA H100 80GB HBM3          On  |   00000000:")
        assert "MiB /  81559MiB |" in block[1]


def test_summary_table_with_persistence_off_and_the_processes_block_as_on_550(tmp_path: Path) -> None:
    recorded = [
        line
        for line in (RECORDED / "summary-1xRTX3080-550.78").read_text().splitlines()
        if line.startswith(("|", "+"))
    ]
    tool = stand_in(
        tmp_path,
        DriverRelease(branch="550", version="550.78", cuda="12.4"),
        'GPU_COUNT=1\nGPU_NAME="NVIDIA GeForce RTX 3080"\nMEMORY_MIB=10240\n',
        persistence=False,
    )
    proc = run(tool)
    assert proc.returncode == 0, proc.stderr
    ours = [line for line in proc.stdout.splitlines() if line.startswith(("|", "+"))]

    assert len(ours) == len(recorded)
    assert ours[:7] == recorded[:7]  # header
    for real_line, our_line in zip(recorded[7:11], ours[7:11], strict=True):
        assert same_layout(real_line, our_line), f"\n{real_line}\n{our_line}"
    assert ours[7].startswith("|   0  NVIDIA GeForce RTX 3080        Off |   00000000:")
    assert ours[11:] == recorded[11:]  # the Processes block, byte for byte
