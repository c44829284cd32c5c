"""GPU generations against the lock: can a host's NVIDIA GPUs run the locked driver, CUDA and PyTorch wheels?

A host's GPUs are read from its PCI bus (playbooks/files/read-pci-gpus.sh: sysfs, no driver needed) before
anything is installed; each device id is looked up in playbooks/vars/gpu_devices.yml (generated from
pci.ids), whose chip names the generation; playbooks/vars/gpu_generations.yml says what each generation can
run, with sources. `host_problems` gives one line per host that cannot work (naming the GPUs, the lock
fields and what would work) and a warning per device id the table does not know (never a refusal).

Like gpuprov.lock, it needs only the standard library and PyYAML: the playbooks' filter plugin loads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprov import lock

GENERATIONS_FILE = Path("vars") / "gpu_generations.yml"  # relative to the playbooks directory
DEVICES_FILE = Path("vars") / "gpu_devices.yml"
READ_SCRIPT = Path("files") / "read-pci-gpus.sh"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA controller, 3D controller; NVSwitches are 0x0680 (bridge)
HOW_TO_UPDATE = (
    "regenerate playbooks/vars/gpu_devices.yml from a newer pci.ids (scripts/gpu_devices_from_pci_ids.py)"
)


@dataclass(frozen=True)
class PciGpu:
    slot: str  # "0000:18:00.0"
    device: str  # "1db1": the PCI device id, lower-case hex without 0x


@dataclass(frozen=True)
class Tables:
    generations: Mapping[str, Any]  # the `gpu_generations` mapping
    devices: Mapping[str, Any]  # device id -> {chip, name}


def _playbooks() -> Path:
    from gpuprov import resources  # here, so the filter plugin can load this module on its own

    return resources.data_dir("playbooks")


def read_script() -> str:
    """The shell program that lists a host's NVIDIA PCI functions (sent over SSH, or run by Ansible)."""
    return (_playbooks() / READ_SCRIPT).read_text()


def load_tables(playbooks: Path | None = None) -> Tables:
    root = playbooks or _playbooks()
    generations = lock.load_mapping(root / GENERATIONS_FILE, "gpu_generations")
    devices = lock.load_mapping(root / DEVICES_FILE, "gpu_devices")
    return Tables(generations, devices)


def parse_listing(text: str) -> list[PciGpu]:
    """The GPUs in read-pci-gpus.sh's output ("SLOT 0x10de 0x1db1 0x030200" lines); other classes dropped."""
    gpus = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[1].lower() != "0x10de" or parts[3].lower()[:6] not in GPU_CLASSES:
            continue
        device = parts[2].lower().removeprefix("0x")
        gpus.append(PciGpu(parts[0], device if re.fullmatch(r"[0-9a-f]{4}", device) else "unknown"))
    return gpus


@dataclass(frozen=True)
class Model:
    """One kind of GPU on a host: device id, how many, name and generation (None: not in the table)."""

    device: str
    count: int
    name: str
    generation: str | None

    def shown(self) -> str:
        what = f"{self.generation}, 10de:{self.device}" if self.generation else f"10de:{self.device}"
        return f"{self.count}x {self.name} ({what})"


def models(gpus: Sequence[PciGpu], tables: Tables) -> list[Model]:
    counts: dict[str, int] = {}
    for gpu in gpus:
        counts[gpu.device] = counts.get(gpu.device, 0) + 1
    found = []
    for device, count in sorted(counts.items()):
        row = tables.devices.get(device)
        name = str(row["name"]) if isinstance(row, Mapping) else "unknown NVIDIA GPU"
        chip = str(row["chip"]) if isinstance(row, Mapping) else ""
        found.append(Model(device, count, name, _generation_of(chip, tables)))
    return found


def _generation_of(chip: str, tables: Tables) -> str | None:
    for row in _generations(tables):
        if any(re.fullmatch(f"{prefix}\\d+[A-Z]*", chip) for prefix in row.get("chips", [])):
            return str(row["name"])
    return None


def _generations(tables: Tables) -> list[Mapping[str, Any]]:
    return [r for r in tables.generations.get("generations", []) if isinstance(r, Mapping)]


def _order(tables: Tables, name: str) -> int:
    names = [str(r["name"]) for r in _generations(tables)]
    return names.index(name) if name in names else -1


def host_problems(
    gpus: Sequence[PciGpu], stack: Mapping[str, Any], tables: Tables, cuda_versions: Iterable[str] = ()
) -> tuple[str | None, list[str]]:
    """(one line naming the GPUs and every lock field they cannot run, or None; warnings for unknown ids).

    `stack` is a lock that gpuprov.lock.check accepted; `cuda_versions` the table's CUDA rows (named as
    what would fit where a generation's CUDA ends)."""
    found = models(gpus, tables)
    warnings = [
        f"GPU 10de:{m.device} ({m.count}x) is not in gpuprov's GPU table, so its generation is not checked "
        f"against the lock; {HOW_TO_UPDATE}"
        for m in found
        if m.generation is None
    ]
    known = [m for m in found if m.generation is not None]
    reasons = [
        *_driver_reasons(known, stack, tables),
        *_cuda_reasons(known, stack, tables, list(cuda_versions)),
        *_flavor_reasons(known, stack, tables),
        *_wheel_reasons(known, stack, tables),
    ]
    if not reasons:
        return None, warnings
    return f"{', '.join(m.shown() for m in known)}: {'; '.join(reasons)}", warnings


def _row(tables: Tables, generation: str | None) -> Mapping[str, Any]:
    return next((r for r in _generations(tables) if r["name"] == generation), {})


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _driver_reasons(known: list[Model], stack: Mapping[str, Any], tables: Tables) -> list[str]:
    branch, version = str(stack["driver_branch"]), str(stack["driver_version"])
    reasons = []
    for generation in _distinct(known):
        last = _row(tables, generation).get("last_driver_branch")
        if last is not None and int(branch) > int(last):
            reasons.append(
                f"driver_branch {branch}: R{last} is the last driver branch for {generation}; "
                f"lock driver_branch {last} or older"
            )
        first = _row(tables, generation).get("first_driver")
        if first is not None and _numbers(version) < _numbers(str(first)):
            reasons.append(
                f"driver_version {version}: {generation} needs driver {first} or newer; lock a newer driver"
            )
    return reasons


def _cuda_reasons(
    known: list[Model], stack: Mapping[str, Any], tables: Tables, cuda_versions: list[str]
) -> list[str]:
    cuda = str(stack["cuda_version"])
    reasons = []
    for generation in _distinct(known):
        last = _row(tables, generation).get("last_cuda_major")
        if last is not None and int(cuda.split(".")[0]) > int(last):
            fitting = [v for v in cuda_versions if int(v.split(".")[0]) <= int(last)]
            newest = f" (newest in the table: {fitting[-1]})" if fitting else ""
            reasons.append(
                f"cuda_version {cuda}: CUDA {last}.x is the last for {generation}; "
                f"lock a CUDA {last}.x release{newest} with the cuDNN, NCCL and PyTorch that fit it"
            )
        first = _row(tables, generation).get("first_cuda")
        if first is not None and _numbers(cuda)[:2] < _numbers(str(first)):
            reasons.append(
                f"cuda_version {cuda}: {generation} needs CUDA {first} or newer; lock CUDA {first} or newer "
                "with the driver, cuDNN, NCCL and PyTorch that fit it"
            )
    return reasons


def _flavor_reasons(known: list[Model], stack: Mapping[str, Any], tables: Tables) -> list[str]:
    flavor = str(stack["driver_flavor"])
    if flavor == "open":
        first = str(tables.generations.get("open_modules_from", ""))
        older = [g for g in _distinct(known) if _order(tables, g) < _order(tables, first)]
        if older:
            return [
                f"driver_flavor open: the open kernel modules need {first} or newer, not "
                f"{' or '.join(older)}; set driver_flavor: proprietary"
            ]
        return []
    refused = tables.generations.get("proprietary_unsupported", {})
    generations = [str(g) for g in refused.get("generations", [])]
    devices = [str(d) for d in refused.get("devices", [])]
    hit = [m.name for m in known if m.generation in generations or m.device in devices]
    if hit:
        return [
            f"driver_flavor proprietary: the proprietary kernel modules are unsupported on "
            f"{', '.join(dict.fromkeys(hit))}; set driver_flavor: open"
        ]
    return []


def _wheel_reasons(known: list[Model], stack: Mapping[str, Any], tables: Tables) -> list[str]:
    tag = str(stack["pytorch_cuda_tag"])
    if not tag.startswith("cu"):
        return []
    major = int(tag[2:-1])
    reasons = []
    for row in tables.generations.get("pytorch_wheels", []):
        if int(row["cuda_major"]) != major:
            continue
        if "newest" in row and tag in row.get("tags", []):
            newest = str(row["newest"])
            newer = [g for g in _distinct(known) if _order(tables, g) > _order(tables, newest)]
            if newer:
                reasons.append(
                    f"pytorch_cuda_tag {tag}: PyTorch's {tag} wheels carry kernels up to {newest}, not "
                    f"{' or '.join(newer)}; lock a newer wheel tag (cu128 or later, with a CUDA lock it fits)"
                )
        if "oldest" not in row:
            continue
        oldest = str(row["oldest"])
        older = [g for g in _distinct(known) if _order(tables, g) < _order(tables, oldest)]
        if older:
            reasons.append(
                f"pytorch_cuda_tag {tag}: PyTorch's CUDA {major} wheels carry kernels for {oldest} and "
                f"newer, not {' or '.join(older)}; lock a CUDA {major - 1}.x wheel tag (with a CUDA "
                f"{major - 1}.x lock)"
            )
    return reasons


def _distinct(known: list[Model]) -> list[str]:
    return list(dict.fromkeys(m.generation for m in known if m.generation is not None))
