"""The stand-in nvidia-smi against recorded output of the real one (tests/recorded/nvidia-smi/, SOURCES.md).

The stand-in runs configured like the recorded machine (driver, CUDA, GPU name, memory, persistence mode);
what must agree is the layout of each branch (header lines, column borders, where each value starts or
ends) and the format of each field, not the live values (temperatures, power, usage, serial numbers).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuprov.check import parsers
from gpuprov.onhost import hostprobe
from gpuprov.sandbox.standins.catalogue import DriverRelease
from gpuprov.sandbox.standins.drivers import _nvidia_smi

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-smi"
PM_STATE = "/run/gpuprov-standin/persistence-mode"
TIMESTAMP = r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}"
UUID = r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@dataclass(frozen=True)
class Machine:
    """The recorded machine, as the stand-in's configuration; the driver version ends the file's name."""

    file: str
    cuda: str
    gpus: int
    name: str
    memory_mib: int
    persistence: bool

    @property
    def driver(self) -> DriverRelease:
        return release(self.file.rsplit("-", 1)[1], self.cuda)

    @property
    def conf(self) -> str:
        return f'GPU_COUNT={self.gpus}\nGPU_NAME="{self.name}"\nMEMORY_MIB={self.memory_mib}\n'


def release(version: str, cuda: str) -> DriverRelease:
    return DriverRelease(branch=version.split(".")[0], version=version, cuda=cuda)


SUMMARIES = [
    Machine("summary-1xA10G-535.247.01", "12.2", 1, "NVIDIA A10G", 23028, False),
    Machine("summary-8xH100-535.129.03", "12.2", 8, "NVIDIA H100 80GB HBM3", 81559, True),
    Machine("summary-2xQuadroRTX4000-535.129.03", "12.2", 2, "Quadro RTX 4000", 8192, False),
    Machine("summary-8xH100-550.90.07", "12.4", 8, "NVIDIA H100 80GB HBM3", 81559, True),
    Machine("summary-1xRTX3080-550.78", "12.4", 1, "NVIDIA GeForce RTX 3080", 10240, False),
    Machine("summary-1xP4-550.135", "12.4", 1, "Tesla P4", 8192, False),
    Machine("summary-1xL4-570.133.20", "12.8", 1, "NVIDIA L4", 23034, True),
    Machine("summary-1xRTX5090-570.124.06", "12.8", 1, "NVIDIA GeForce RTX 5090", 32607, True),
    Machine("summary-1xT4-580.105.08", "13.0", 1, "Tesla T4", 15360, True),
    Machine("summary-2xA100-580.126.09", "13.0", 2, "NVIDIA A100-SXM4-40GB", 40960, True),
    Machine("summary-1xH100-580.159.04", "13.0", 1, "NVIDIA H100 80GB HBM3", 81559, True),
]


def stand_in(tmp_path: Path, machine: Machine) -> Path:
    # The persistence-mode state file moves under tmp_path so the test can switch it without root.
    state = tmp_path / "persistence-mode"
    if machine.persistence:
        state.touch()
    script = _nvidia_smi(machine.driver).content.decode()
    assert f"PM_STATE={PM_STATE}\n" in script
    tool = tmp_path / "nvidia-smi"
    tool.write_text(script.replace(f"PM_STATE={PM_STATE}\n", f"PM_STATE={state}\n"))
    tool.chmod(0o755)
    (tmp_path / "gpus.conf").write_text(machine.conf)
    return tool


def run(tool: Path, *args: str) -> str:
    env = {**os.environ, "GPUPROV_STANDIN_GPUS_CONF": str(tool.parent / "gpus.conf")}
    proc = subprocess.run([str(tool), *args], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


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


def compare_summary(recorded: list[str], ours: list[str]) -> None:
    """Line by line as far as the recording goes: the GPU rows by layout, everything else byte for byte."""
    if re.fullmatch(TIMESTAMP, recorded[0].rstrip()):
        assert re.fullmatch(TIMESTAMP, ours[0].rstrip())
        if recorded[0] != recorded[0].rstrip():  # the paste kept the padding
            assert len(ours[0]) == len(recorded[0])
        recorded, ours = recorded[1:], ours[1:]
    else:  # the capture starts at the table
        ours = ours[1:]
    in_gpu_rows = False
    for n, (real, our) in enumerate(zip(recorded, ours, strict=False)):
        if not real:  # a paste that dropped the empty line's padding
            assert not our.strip(), f"line {n}: {our!r}"
            in_gpu_rows = False
        elif in_gpu_rows and real.startswith("|"):
            # The recorded host ran in exclusive-process compute mode, which the stand-in does not simulate.
            real = real.replace("E. Process", "   Default")
            assert same_layout(real, our), f"line {n}:\n{real}\n{our}"
        else:
            assert our == real, f"line {n}:\n{real!r}\n{our!r}"
            in_gpu_rows = in_gpu_rows or (real.startswith("|=") and "+" in real)
            in_gpu_rows = in_gpu_rows and bool(real.strip())


@pytest.mark.parametrize("machine", SUMMARIES, ids=[m.file for m in SUMMARIES])
def test_summary_table_has_the_layout_of_the_recorded_branch(tmp_path: Path, machine: Machine) -> None:
    recorded = (RECORDED / machine.file).read_text().splitlines()
    ours = run(stand_in(tmp_path, machine)).splitlines()
    compare_summary(recorded, ours)

    # The GPU rows carry the recorded machine's name and persistence mode where the real ones do.
    pm = "On " if machine.persistence else "Off"
    first = next(line for line in ours if re.match(r"\|\s+0  ", line))
    assert first.startswith(f"|   0  {machine.name:<30} {pm} |")
    assert f"MiB / {machine.memory_mib}MiB |" in re.sub(" +", " ", ours[ours.index(first) + 1])


def test_every_gpu_of_an_8_gpu_host_is_laid_out_like_the_recorded_first(tmp_path: Path) -> None:
    machine = SUMMARIES[3]  # 8x H100, 550.90.07
    recorded = (RECORDED / machine.file).read_text().splitlines()
    ours = run(stand_in(tmp_path, machine)).splitlines()
    rows = [line for line in ours[8:] if line.startswith(("|", "+"))][: 8 * 4]
    assert len(rows) == 32
    for n in range(8):
        for real, our in zip(recorded[8:12], rows[4 * n : 4 * n + 4], strict=True):
            assert same_layout(real, our), f"GPU {n}:\n{real}\n{our}"
        assert rows[4 * n].startswith(f"|   {n}  NVIDIA H100 80GB HBM3          On  |   00000000:")


@pytest.mark.parametrize(
    ("branch", "corner", "width", "pid"),
    [("535", "|", 89, "        PID"), ("550", "|", 91, "        PID"), ("570", "|", 91, "              PID"),
     ("580", "+", 91, "              PID")],
)  # fmt: skip
def test_the_differences_between_branches(branch: str, corner: str, width: int, pid: str) -> None:
    """What tells the branches apart in the recordings, stated once so a regression reads plainly."""
    script = _nvidia_smi(DriverRelease(branch=branch, version=f"{branch}.1.2", cuda="12.2")).content.decode()
    assert f"\n{corner}-----------------------------------------+" in script
    assert "\n+" + "-" * (width - 2) + "+\n" in script
    assert f"|  GPU   GI   CI{pid}   Type   Process name" in script


# -q, --query-gpu and -L


QUERIES = [
    Machine("query-1xV100-535.86.10", "12.2", 1, "Tesla V100-PCIE-16GB", 16384, False),
    Machine("query-1xA40-550.127.05", "12.4", 1, "NVIDIA A40", 46068, True),
    Machine("query-1xRTX5090-570.124.06", "12.8", 1, "NVIDIA GeForce RTX 5090", 32607, True),
]


def fields(text: str) -> dict[str, str]:
    """`label : value` lines of -q output, keyed by the label with its indentation."""
    lines = re.finditer(r"(?m)^(?P<label> *\S[^:\n]*?) +: (?P<value>.*)$", text)
    return {m["label"]: m["value"] for m in lines}


@pytest.mark.parametrize("machine", QUERIES, ids=[m.file for m in QUERIES])
def test_query_prints_the_recorded_fields_in_their_format(tmp_path: Path, machine: Machine) -> None:
    recorded = (RECORDED / machine.file).read_text()
    ours = run(stand_in(tmp_path, machine), "-q")

    # The same head: an empty line, the banner, the versions, the GPU count, the GPU's bus id.
    real_lines = [line for line in recorded.splitlines() if not line.startswith("[HAMI-core")]
    our_lines = ours.splitlines()
    assert our_lines[:3] == real_lines[:3] == ["", "==============NVSMI LOG==============", ""]
    assert re.fullmatch(rf"Timestamp {{33}}: {TIMESTAMP}", our_lines[3])
    assert our_lines[4:7] == real_lines[4:7]  # Driver Version, CUDA Version: the same as recorded
    assert our_lines[7].split(":")[0] == real_lines[7].split(":")[0]  # Attached GPUs
    assert re.fullmatch(r"GPU [0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F]", our_lines[8])
    assert re.fullmatch(r"GPU [0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F]", real_lines[8])

    # Each field the stand-in prints is a real field: same label, same indentation, same column, and a
    # value of the recorded form.
    # The recordings end at Minor Number: compare what comes before (the sections after it: below).
    head = ours[: ours.index("\n", ours.index("    Minor Number")) + 1]
    real, mine = fields(recorded), fields(head)
    assert list(mine) == [
        "Timestamp", "Driver Version", "CUDA Version", "Attached GPUs",
        "    Product Name", "    Persistence Mode", "    GPU UUID", "    Minor Number",
    ]  # fmt: skip
    assert set(mine) <= set(real)
    real_order = [label for label in real if label in mine]
    assert real_order == list(mine)
    for label, value in mine.items():
        assert f"\n{label:<42}: {value}\n" in f"\n{ours}"
    assert mine["    Product Name"] == real["    Product Name"]
    assert mine["    Persistence Mode"] == real["    Persistence Mode"]
    assert re.fullmatch(UUID, mine["    GPU UUID"]) and re.fullmatch(UUID, real["    GPU UUID"])


def test_query_gpu_csv_has_the_recorded_header_and_fields(tmp_path: Path) -> None:
    recorded = (RECORDED / "csv-2xGPU-570.86.15").read_text().splitlines()
    machine = Machine("csv-2xGPU-570.86.15", "12.8", 2, "NVIDIA TITAN V", 12288, False)
    tool = stand_in(tmp_path, machine)
    query = "--query-gpu=compute_cap,compute_mode,driver_version,name,index"
    ours = run(tool, query, "--format=csv").splitlines()

    assert ours[0] == recorded[0]  # the header names the fields as asked, joined by ", "
    assert len(ours) == len(recorded)
    for real, our in zip(recorded[1:], ours[1:], strict=True):
        real_fields, our_fields = real.split(", "), our.split(", ")
        assert len(our_fields) == len(real_fields) == 5
        assert re.fullmatch(r"\d+\.\d", our_fields[0]) and re.fullmatch(r"\d+\.\d", real_fields[0])
        assert our_fields[1:3] == real_fields[1:3]  # Default, the driver version
        assert our_fields[4] == real_fields[4]  # the index
    assert run(tool, query, "--format=csv,noheader").splitlines() == ours[1:]


LISTS = [
    Machine("list-2xGPU-570.86.15", "12.8", 2, "NVIDIA TITAN V", 12288, False),
    Machine("list-2xQuadroRTX4000-535.129.03", "12.2", 2, "Quadro RTX 4000", 8192, False),
    Machine("list-1xH100-580.159.04", "13.0", 1, "NVIDIA H100 80GB HBM3", 81559, True),
]


@pytest.mark.parametrize("machine", LISTS, ids=[m.file for m in LISTS])
def test_list_has_the_recorded_form(tmp_path: Path, machine: Machine) -> None:
    recorded = (RECORDED / machine.file).read_text().splitlines()
    ours = run(stand_in(tmp_path, machine), "-L").splitlines()
    assert len(ours) == len(recorded)
    for n, (real, our) in enumerate(zip(recorded, ours, strict=True)):
        assert re.fullmatch(rf"GPU {n}: .+ \(UUID: {UUID}\)", real)
        assert re.fullmatch(rf"GPU {n}: {machine.name} \(UUID: {UUID}\)", our)


def test_query_head_has_the_labels_of_a_580_recording(tmp_path: Path) -> None:
    """The 580 recording comes from a vGPU host driver (its CUDA Version reads "Not Found" and it adds a vGPU
    line), so only the labels and their column are compared."""
    recorded = fields((RECORDED / "query-d-MEMORY-PERFORMANCE-4xRTXPRO6000-580.105.06").read_text())
    machine = Machine("q-580.105.06", "13.0", 4, "NVIDIA RTX PRO 6000 Blackwell Server Edition", 97887, True)
    ours = fields(run(stand_in(tmp_path, machine), "-q"))
    for label in ("Timestamp", "Driver Version", "CUDA Version", "Attached GPUs"):
        assert label in recorded and label in ours
    assert ours["Driver Version"] == recorded["Driver Version"]
    assert ours["Attached GPUs"] == recorded["Attached GPUs"]


# -q: the GPU health sections, against whole first-GPU recordings of data-center GPUs (SOURCES.md, FIELDS.md)

FULL = [
    Machine("query-full-1xA40-550.127.05", "12.4", 1, "NVIDIA A40", 46068, True),
    Machine("query-full-pending-remap-A100SXM4-555.42.02", "12.5", 1, "NVIDIA A100-SXM4-80GB", 81920, True),
    Machine("query-full-1xH100SXM-565.57.01", "12.7", 1, "NVIDIA H100 80GB HBM3", 81559, True),
    Machine("query-full-1xH100-580.159.04", "13.0", 1, "NVIDIA H100 80GB HBM3", 81559, True),
]
HEALTH_SECTIONS = (
    "GPU Link Info",
    "Clocks Event Reasons",
    "ECC Mode",
    "ECC Errors",
    "Retired Pages",
    "Remapped Rows",
)
VALUE_FORMS = r"\d+|\d+x|\d+ bank\(s\)|N/A|Yes|No|Active|Not Active|Enabled|Disabled|P\d+"


def section(text: str, name: str) -> list[str]:
    """The first GPU's section `name`: its title line and the more indented lines under it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == name)
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if len(line) - len(line.lstrip()) <= indent:
            break
        block.append(line)
    return block


def labels(block: list[str]) -> list[str]:
    """The lines with their values blanked: what must agree between the real tool and the stand-in."""
    return [re.sub(r"(?<=: ).*$", "VALUE", line.rstrip()) for line in block]


@pytest.mark.parametrize("machine", FULL, ids=[m.file for m in FULL])
def test_query_health_sections_are_laid_out_as_recorded(tmp_path: Path, machine: Machine) -> None:
    recorded = (RECORDED / machine.file).read_text()
    ours = run(stand_in(tmp_path, machine), "-q")
    for name in HEALTH_SECTIONS:
        real_block, our_block = section(recorded, name), section(ours, name)
        assert labels(our_block) == labels(real_block), name
        for line in real_block + our_block:
            if ": " in line:
                assert re.fullmatch(VALUE_FORMS, line.split(": ", 1)[1]), line
    # The PCI section: the stand-in prints Bus Id and GPU Link Info, which the real one has in that order,
    # with the labels padded as far as the recording pads them (to column 42 up to 580.105, 55 in 580.159).
    width = section(recorded, "PCI")[1].index(": ")
    assert section(ours, "PCI")[1] == f"{'        Bus Id':<{width}}: 00000000:18:00.0"
    real_pci = labels(section(recorded, "PCI"))
    assert real_pci.index(labels(section(ours, "PCI"))[1]) < real_pci.index("        GPU Link Info")


def test_a_pending_row_remap_reads_as_the_recorded_one(tmp_path: Path) -> None:
    machine = FULL[1]  # the recorded A100 with a row remap pending
    tool = stand_in(tmp_path, machine)
    (tmp_path / "gpus.conf").write_text(machine.conf + 'REMAP_PENDING_GPUS="0"\n')
    ours = section(run(tool, "-q"), "Remapped Rows")
    real = section((RECORDED / machine.file).read_text(), "Remapped Rows")
    pending = f"{'        Pending':<42}: Yes"
    assert pending in ours and pending in real
    assert f"{'        Remapping Failure Occurred':<42}: No" in ours


def test_ecc_and_failed_remap_settings_apply_to_their_gpu_only(tmp_path: Path) -> None:
    machine = Machine("sandbox-550.127.08", "12.4", 2, "NVIDIA H100 80GB HBM3", 81559, True)
    tool = stand_in(tmp_path, machine)
    (tmp_path / "gpus.conf").write_text(machine.conf + 'ECC_UNCORRECTABLE_GPUS="1"\nREMAP_FAILED_GPUS="1"\n')
    first, second = run(tool, "-q").split("\nGPU ")[1:]
    assert f"{'            DRAM Uncorrectable':<42}: 0" in first
    assert f"{'            DRAM Uncorrectable':<42}: 1" in second
    assert f"{'        Remapping Failure Occurred':<42}: No" in first
    assert f"{'        Remapping Failure Occurred':<42}: Yes" in second


def test_ecc_query_fields_agree_with_q_and_the_535_recording(tmp_path: Path) -> None:
    # The counters check queries (parsers.ECC_FIELDS) answer what -q prints, with the recording's header.
    machine = Machine("sandbox-550.127.08", "12.4", 2, "NVIDIA H100 80GB HBM3", 81559, True)
    tool = stand_in(tmp_path, machine)
    (tmp_path / "gpus.conf").write_text(machine.conf + 'ECC_UNCORRECTABLE_GPUS="1"\n')
    fields = ",".join(parsers.ECC_FIELDS)
    counts = parsers.ecc_query(run(tool, f"--query-gpu={fields}", "--format=csv,noheader,nounits"))
    q = parsers.smi_query(run(tool, "-q"))
    for gpu in q.gpus:
        from_q = parsers.memory_health(gpu)
        assert parsers.with_ecc_query(from_q, counts[gpu["bus_id"]]) == from_q
    assert [parsers.memory_health(g).uncorrectable_volatile for g in q.gpus] == [0, 1]
    recorded = (RECORDED / "query-gpu-ecc-4xH100-535.161.07").read_text().splitlines()[0].split(", ")
    header = run(tool, "--query-gpu=" + ",".join(f for f in recorded if f.startswith("ecc.")), "--format=csv")
    assert header.splitlines()[0].split(", ") == [f for f in recorded if f.startswith("ecc.")]
    bogus = subprocess.run(
        [str(tool), "--query-gpu=ecc.errors.corrected.volatile.bogus", "--format=csv"],
        capture_output=True,
        text=True,
        env={**os.environ, "GPUPROV_STANDIN_GPUS_CONF": str(tmp_path / "gpus.conf")},
        check=False,
    )
    assert bogus.returncode == 2


def test_hostprobe_reads_the_ecc_counters_from_the_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # check's host program, as on a sandbox node: nvidia-smi on PATH, the request naming the ECC fields.
    machine = Machine("sandbox-550.127.08", "12.4", 2, "NVIDIA H100 80GB HBM3", 81559, True)
    stand_in(tmp_path, machine)
    (tmp_path / "gpus.conf").write_text(machine.conf + 'ECC_UNCORRECTABLE_GPUS="1"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("GPUPROV_STANDIN_GPUS_CONF", str(tmp_path / "gpus.conf"))
    found = hostprobe._gpu_probes({"ecc_fields": list(parsers.ECC_FIELDS)}, str(tmp_path / "no-python"))
    ecc = found["smi_ecc"]
    assert isinstance(ecc, dict) and ecc["rc"] == 0, ecc
    counts = parsers.ecc_query(str(ecc["stdout"]))
    assert [c["ecc.errors.uncorrected.volatile.dram"] for c in counts.values()] == [0, 1]


RECOVERY_ACTION = [
    ("query-full-1xV100-550.127.05", "Tesla V100-PCIE-16GB"),
    ("query-full-pending-remap-A100SXM4-555.42.02", "NVIDIA A100-SXM4-80GB"),
    ("query-full-1xH100SXM-565.57.01", "NVIDIA H100 80GB HBM3"),
    ("query-full-1xRTX5090-570.124.06", "NVIDIA GeForce RTX 5090"),
    ("query-full-1xH100-580.159.04", "NVIDIA H100 80GB HBM3"),
]


@pytest.mark.parametrize(("file", "name"), RECOVERY_ACTION, ids=[f for f, _ in RECOVERY_ACTION])
def test_query_prints_gpu_recovery_action_where_the_recorded_driver_does(
    tmp_path: Path, file: str, name: str
) -> None:
    recorded = fields((RECORDED / file).read_text())
    ours = fields(run(stand_in(tmp_path, Machine(file, "12.4", 1, name, 81559, True)), "-q"))
    label = "    GPU Recovery Action"
    assert ours.get(label) == recorded.get(label)
