"""The stand-in nvidia-smi as the mirror's nvidia-utils package installs it: no GPUs, and simulated ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuprov.sandbox.mirror import MirrorContent
from tests.local.sandbox.mirror.helpers import (
    extract,
    needs_build_tools,
    repo,
    smi,
)

pytestmark = needs_build_tools


@pytest.fixture(scope="module")
def nvidia_smi(built: MirrorContent, tmp_path_factory: pytest.TempPathFactory) -> Path:
    deb = repo(built, "debian12") / "nvidia-utils-550_550.127.08-1_amd64.deb"
    return extract(deb, tmp_path_factory.mktemp("utils")) / "usr/bin/nvidia-smi"


@pytest.mark.integration
def test_nvidia_smi_without_gpus_behaves_like_the_real_one(nvidia_smi: Path, tmp_path: Path) -> None:
    for args in ((), ("-L",), ("--query-gpu=name", "--format=csv")):
        proc = smi(nvidia_smi, tmp_path / "absent.conf", *args)
        assert (proc.returncode, proc.stdout) == (6, "No devices were found\n")
    assert "gpuprov sandbox stand-in" in smi(nvidia_smi, tmp_path / "absent.conf", "--help").stdout


@pytest.mark.integration
def test_nvidia_smi_reports_simulated_gpus(nvidia_smi: Path, tmp_path: Path) -> None:
    conf = tmp_path / "standin-gpus.conf"
    conf.write_text('GPU_COUNT=2\nGPU_NAME="NVIDIA H100 80GB HBM3"\nMEMORY_MIB=81559\n')

    listed = smi(nvidia_smi, conf, "-L")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert len(lines) == 2
    uuid = r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
    for i, line in enumerate(lines):
        assert re.fullmatch(rf"GPU {i}: NVIDIA H100 80GB HBM3 \(UUID: {uuid}\)", line)

    query = "--query-gpu=index,name,driver_version,memory.total,uuid"
    csv = smi(nvidia_smi, conf, query, "--format=csv").stdout.splitlines()
    assert csv[0] == "index, name, driver_version, memory.total [MiB], uuid"
    assert csv[1].startswith("0, NVIDIA H100 80GB HBM3, 550.127.08, 81559 MiB, GPU-")
    assert len(csv) == 3
    bare = smi(nvidia_smi, conf, query, "--format=csv,noheader,nounits").stdout.splitlines()
    assert [line.split(", ")[:4] for line in bare] == [
        ["0", "NVIDIA H100 80GB HBM3", "550.127.08", "81559"],
        ["1", "NVIDIA H100 80GB HBM3", "550.127.08", "81559"],
    ]
    assert bare[0].split(", ")[4] == lines[0].split("UUID: ")[1].rstrip(")")  # same UUIDs as -L

    table = smi(nvidia_smi, conf).stdout
    assert "Driver Version: 550.127.08     CUDA Version: 12.4" in table
    assert table.count("NVIDIA H100 80GB HBM3") == 2
    assert {len(line) for line in table.splitlines()[1:] if line.startswith(("|", "+"))} == {91}

    bad = smi(nvidia_smi, conf, "--query-gpu=bogus", "--format=csv")
    assert bad.returncode == 2 and 'Field "bogus" is not a valid field to query.' in bad.stderr
