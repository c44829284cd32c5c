"""Parsers for what the NVIDIA and RDMA tools print; each is tested against recorded real outputs
(tests/recorded/, every file with its source). They take text and return plain data; none runs anything.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

# ----- /proc/driver/nvidia/version ------------------------------------------------------------------------

# `NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  ...` (proprietary) or
# `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ...` (open).
_NVRM = re.compile(
    r"NVRM version: NVIDIA UNIX "
    r"(?:(?P<open>Open Kernel Module for) (?P<arch_o>\S+)|(?P<arch_p>\S+) Kernel Module)"
    r"\s+(?P<version>\d+\.\d+(?:\.\d+)?)\s"
)


@dataclass(frozen=True)
class LoadedModule:
    version: str
    flavor: str  # "open" or "proprietary", the lock's driver_flavor words
    arch: str


def proc_driver_version(text: str) -> LoadedModule | None:
    """The loaded kernel module from /proc/driver/nvidia/version; None when the text has no NVRM line."""
    match = _NVRM.search(text)
    if match is None:
        return None
    is_open = match.group("open") is not None
    return LoadedModule(
        version=match.group("version"),
        flavor="open" if is_open else "proprietary",
        arch=match.group("arch_o") if is_open else match.group("arch_p"),
    )


# ----- nvidia-smi -q --------------------------------------------------------------------------------------


@dataclass
class SmiQuery:
    driver_version: str | None = None
    cuda_version: str | None = None  # the newest CUDA the driver supports, or None ("Not Found")
    attached: int | None = None
    gpus: list[dict[str, str]] = field(default_factory=list)  # per GPU: "Section/Field" -> value, "bus_id"


def smi_query(text: str) -> SmiQuery:
    """`nvidia-smi -q`: the header's versions and each `GPU <bus id>` section's fields.

    Nested fields are named by their path (`MIG Mode/Current`); a label line without a value opens a
    section for the more indented lines below it.
    """
    result = SmiQuery()
    gpu: dict[str, str] | None = None
    sections: list[tuple[int, str]] = []  # (indent, name) of the open sections inside a GPU
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.startswith("="):
            continue
        indent = len(line) - len(line.lstrip())
        label, sep, value = line.strip().partition(":")
        label, value = label.strip(), value.strip()
        if indent == 0 and line.startswith("GPU "):
            gpu = {"bus_id": line[4:].strip()}
            result.gpus.append(gpu)
            sections = []
            continue
        if gpu is None:
            if label == "Driver Version":
                result.driver_version = value
            elif label == "CUDA Version":
                result.cuda_version = value if re.fullmatch(r"\d+\.\d+", value) else None
            elif label == "Attached GPUs" and value.isdigit():
                result.attached = int(value)
            continue
        while sections and sections[-1][0] >= indent:
            sections.pop()
        if not sep:
            sections.append((indent, label))
            continue
        path = "/".join([name for _, name in sections] + [label])
        gpu[path] = value
    return result


# ----- nvidia-smi --query-gpu=... --format=csv -----------------------------------------------------------


def smi_csv(text: str, header: bool = True, fields: list[str] | None = None) -> list[dict[str, str]]:
    """`nvidia-smi --query-gpu=A,B --format=csv[,noheader]`: one mapping per GPU, fields split at `, `.

    With noheader, give the fields in the order they were asked for.
    """
    rows = [[cell.strip() for cell in row] for row in csv.reader(io.StringIO(text)) if row]
    if header:
        if not rows:
            return []
        fields, rows = rows[0], rows[1:]
    if fields is None:
        raise ValueError("smi_csv: fields are needed for output without a header")
    return [dict(zip(fields, row, strict=True)) for row in rows if len(row) == len(fields)]


# ----- nvidia-smi nvlink --status --------------------------------------------------------------------------

_NVLINK_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: ([^)]*)\)")
_NVLINK_LINK = re.compile(r"^\s+Link (\d+): (.*)$")


@dataclass
class NvlinkGpu:
    index: int
    name: str
    links: dict[int, str] = field(default_factory=dict)  # link -> "25.781 GB/s" or "<inactive>"

    @property
    def inactive(self) -> list[int]:
        return [link for link, speed in self.links.items() if speed.strip() == "<inactive>"]


def nvlink_status(text: str) -> list[NvlinkGpu]:
    """`nvidia-smi nvlink --status`: each GPU's links and their speed, or `<inactive>`."""
    gpus: list[NvlinkGpu] = []
    for line in text.splitlines():
        gpu_match = _NVLINK_GPU.match(line)
        if gpu_match:
            gpus.append(NvlinkGpu(int(gpu_match.group(1)), gpu_match.group(2)))
            continue
        link_match = _NVLINK_LINK.match(line)
        if link_match and gpus:
            gpus[-1].links[int(link_match.group(1))] = link_match.group(2).strip()
    return gpus


# ----- dmesg / journalctl -k: Xid events ------------------------------------------------------------------

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<code>\d+), ?(?P<text>.*)$")
# plain `dmesg` and `journalctl -k -o short-monotonic` start a line with its seconds since boot `[ 24.82]`
_SINCE_BOOT = re.compile(r"^\[\s*(\d+\.\d+)\]")


@dataclass(frozen=True)
class XidEvent:
    pci: str
    code: int
    text: str  # the rest of the line (pid, name, the driver's explanation)
    seconds: float | None = None  # since boot, where the log line gives it


def xid_events(text: str) -> list[XidEvent]:
    """Every `NVRM: Xid (PCI:...): CODE, ...` line of a kernel log, whatever prefix the log tool adds."""
    events = []
    for line in text.splitlines():
        match = _XID.search(line)
        if match:
            since_boot = _SINCE_BOOT.match(line)
            events.append(
                XidEvent(
                    match.group("pci"),
                    int(match.group("code")),
                    match.group("text").strip(),
                    float(since_boot.group(1)) if since_boot else None,
                )
            )
    return events


# ----- ibstat ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IbPort:
    ca: str
    port: int
    state: str  # "Active", "Down", "Init" ...
    physical_state: str  # "LinkUp", "Disabled", "Polling" ...
    rate: int | None  # Gb/s, as ibstat prints it
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)


def ibstat(text: str) -> list[IbPort]:
    """Every port of every CA in `ibstat`'s output (tabs or spaces; lines of other tools ignored)."""
    ports: list[IbPort] = []
    ca = ""
    port: dict[str, str] | None = None

    def close() -> None:
        if port is not None and "number" in port:
            rate = port.get("Rate", "")
            ports.append(
                IbPort(
                    ca=ca,
                    port=int(port["number"]),
                    state=port.get("State", ""),
                    physical_state=port.get("Physical state", ""),
                    rate=int(float(rate)) if re.fullmatch(r"\d+(\.\d+)?", rate) else None,
                    link_layer=port.get("Link layer", ""),
                )
            )

    for line in text.splitlines():
        ca_match = re.match(r"^CA '([^']+)'", line)
        if ca_match:
            close()
            ca, port = ca_match.group(1), None
            continue
        if not line[:1].isspace():  # another tool's line (ibpanic, ibwarn)
            continue
        port_match = re.match(r"^\s+Port (\d+):\s*$", line)
        if port_match:
            close()
            port = {"number": port_match.group(1)}
            continue
        if port is not None:
            key, sep, value = line.strip().partition(":")
            if sep:
                port[key.strip()] = value.strip()
    close()
    return ports


# ----- nvidia-smi -q: memory health, clocks event reasons, PCIe link (fields of smi_query's GPUs) --------
# The field names differ by driver branch (tests/recorded/nvidia-smi/FIELDS.md): "Clocks Throttle Reasons"
# up to 470, "Clocks Event Reasons" from 535; ECC counts per memory kind ("Single Bit"/"Double Bit", each
# with a "Total") on pre-Ampere GPUs, per SRAM/DRAM on Ampere and newer; a one-line "Remapped Rows : N/A"
# where the GPU has no row remapping (before Ampere, and GeForce cards).

# "SRAM Uncorrectable" is one counter up to R510 (an A100-SXM4-80GB on 510.73.08: stas00/ml-engineering
# compute/accelerator/nvidia/debug.md); later drivers split it into Parity and SEC-DED.
_SRAM_UNCORRECTABLE = ("SRAM Uncorrectable", "SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED")
_UNCORRECTABLE_ECC = ("Double Bit/Total", "DRAM Uncorrectable", *_SRAM_UNCORRECTABLE)


@dataclass(frozen=True)
class MemoryHealth:
    remap_pending: bool  # Remapped Rows/Pending: Yes (a reset or reboot applies the remap)
    remap_failed: bool  # Remapped Rows/Remapping Failure Occurred: Yes
    retirement_pending: bool  # Retired Pages/Pending Page Blacklist (or Pending Page Retirement): Yes
    uncorrectable_volatile: int  # since the driver loaded; N/A counts as 0
    uncorrectable_aggregate: int  # over the GPU's life (inforom)
    sram_uncorrectable_aggregate: int = 0  # the part of uncorrectable_aggregate in SRAM
    sram_correctable: int = 0  # SRAM correctable, the larger of volatile and aggregate
    remapped_uncorrectable: int = (
        0  # Remapped Rows/Uncorrectable Error: rows remapped for uncorrectable errors
    )


def _count(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 0


def memory_health(gpu: dict[str, str]) -> MemoryHealth:
    """One GPU's row-remap, page-retirement and ECC state from its `-q` fields."""

    def summed(scope: str, names: tuple[str, ...]) -> int:
        return sum(_count(gpu.get(f"ECC Errors/{scope}/{name}")) for name in names)

    retirement = gpu.get("Retired Pages/Pending Page Blacklist") or gpu.get(
        "Retired Pages/Pending Page Retirement"
    )
    return MemoryHealth(
        remap_pending=gpu.get("Remapped Rows/Pending") == "Yes",
        remap_failed=gpu.get("Remapped Rows/Remapping Failure Occurred") == "Yes",
        retirement_pending=retirement == "Yes",
        uncorrectable_volatile=summed("Volatile", _UNCORRECTABLE_ECC),
        uncorrectable_aggregate=summed("Aggregate", _UNCORRECTABLE_ECC),
        sram_uncorrectable_aggregate=summed("Aggregate", _SRAM_UNCORRECTABLE),
        sram_correctable=max(summed(scope, ("SRAM Correctable",)) for scope in ("Volatile", "Aggregate")),
        remapped_uncorrectable=_count(gpu.get("Remapped Rows/Uncorrectable Error")),
    )


# ----- nvidia-smi --query-gpu=ecc.errors...: the stable names of the ECC counters ------------------------
# The -q labels changed across branches (above); these field names did not (`nvidia-smi --help-query-gpu`;
# recorded on an H100 with 535.161.07: tests/recorded/nvidia-smi/SOURCES.md). Azure's node health check
# reads the same fields (azure_gpu_ecc.nhc). A GPU without the counter prints `[N/A]` (or `N/A`).
ECC_FIELDS = (
    "pci.bus_id",
    "ecc.errors.uncorrected.volatile.sram",
    "ecc.errors.uncorrected.volatile.dram",
    "ecc.errors.uncorrected.aggregate.sram",
    "ecc.errors.uncorrected.aggregate.dram",
    "ecc.errors.corrected.volatile.sram",
    "ecc.errors.corrected.aggregate.sram",
)


def ecc_query(text: str) -> dict[str, dict[str, int | None]]:
    """`--query-gpu=<ECC_FIELDS> --format=csv,noheader,nounits`: each GPU's counters by its bus id
    (None where the GPU has no such counter)."""
    found: dict[str, dict[str, int | None]] = {}
    for row in smi_csv(text, header=False, fields=list(ECC_FIELDS)):
        found[row["pci.bus_id"].upper()] = {
            name: int(value) if value.isdigit() else None
            for name, value in row.items()
            if name != "pci.bus_id"
        }
    return found


def with_ecc_query(health: MemoryHealth, counts: dict[str, int | None] | None) -> MemoryHealth:
    """The -q reading with the ECC counts replaced by the query's where it gives them."""
    if not counts:
        return health

    def pick(*names: str) -> int | None:
        values = [counts.get(name) for name in names]
        return None if any(v is None for v in values) else sum(v or 0 for v in values)

    prefix = "ecc.errors."
    volatile = pick(f"{prefix}uncorrected.volatile.sram", f"{prefix}uncorrected.volatile.dram")
    aggregate = pick(f"{prefix}uncorrected.aggregate.sram", f"{prefix}uncorrected.aggregate.dram")
    sram_aggregate = pick(f"{prefix}uncorrected.aggregate.sram")
    correctable = [pick(f"{prefix}corrected.{scope}.sram") for scope in ("volatile", "aggregate")]
    return MemoryHealth(
        health.remap_pending,
        health.remap_failed,
        health.retirement_pending,
        health.uncorrectable_volatile if volatile is None else volatile,
        health.uncorrectable_aggregate if aggregate is None else aggregate,
        health.sram_uncorrectable_aggregate if sram_aggregate is None else sram_aggregate,
        max([health.sram_correctable, *(c for c in correctable if c is not None)]),
        health.remapped_uncorrectable,
    )


# ----- nvidia-smi -q: clocks event reasons, PCIe link ---------------------------------------------------

CLOCK_REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")


def active_clock_reasons(gpu: dict[str, str]) -> list[str] | None:
    """The clocks event (throttle) reasons that read `Active`; None where the GPU reports none (N/A)."""
    found = False
    active = []
    for path, value in gpu.items():
        section, _, reason = path.partition("/")
        if section in CLOCK_REASON_SECTIONS and reason and "/" not in reason:
            found = True
            if value == "Active":
                active.append(reason)
    return active if found else None


@dataclass(frozen=True)
class PcieLink:
    gen_current: int
    gen_max: int
    width_current: int
    width_max: int


def pcie_link(gpu: dict[str, str]) -> PcieLink | None:
    """The GPU's PCIe generation and link width, current and max; None where nvidia-smi shows N/A."""
    base = "PCI/GPU Link Info"
    values = [
        gpu.get(f"{base}/PCIe Generation/Current", ""),
        gpu.get(f"{base}/PCIe Generation/Max", ""),
        gpu.get(f"{base}/Link Width/Current", "").rstrip("x"),
        gpu.get(f"{base}/Link Width/Max", "").rstrip("x"),
    ]
    if not all(value.isdigit() for value in values):
        return None
    gen_current, gen_max, width_current, width_max = map(int, values)
    return PcieLink(gen_current, gen_max, width_current, width_max)


# ----- dkms status ----------------------------------------------------------------------------------------

# dkms 3: `nvidia/535.86.05, 6.5.0-060500rc5-generic, x86_64: installed`;
# dkms 2: `nvidia, 460.91.03, 5.11.0-36-generic, x86_64: installed`. A warning may follow the state.
_DKMS = re.compile(
    r"^(?P<module>[^,/\s]+)(?:/|, )(?P<version>[^,\s]+), (?P<kernel>[^,\s]+), (?P<arch>[^:\s]+): "
    r"(?P<state>\w+)"
)


@dataclass(frozen=True)
class DkmsEntry:
    module: str
    version: str
    kernel: str
    arch: str
    state: str  # "installed", "built", ...


def dkms_status(text: str) -> list[DkmsEntry]:
    """Each module/version/kernel line of `dkms status`; `added` lines (no kernel yet) are skipped."""
    entries = []
    for line in text.splitlines():
        match = _DKMS.match(line.strip())
        if match:
            entries.append(DkmsEntry(**match.groupdict()))
    return entries
