"""The recorded facts keep the compatibility table honest.

Every release that a recording under tests/recorded names (a driver in an nvidia-smi output, a kernel log, a
DKMS status or a bench result; the CUDA an nvidia-smi header reports; a PyTorch build; an NCCL build) and
every release in the sandbox mirror's package index (the stand-in catalogue and its torch wheel) must be
one a lock can name with gpuprov's table, or be listed below with the reason a lock cannot name it. A new
recording of a release the table lacks fails here until the release gets its row (with its source) or its
reason; a reason that no longer holds (the release is now in the table, or no recording names it) fails too.
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuprov import lock
from gpuprov.sandbox import mirror
from gpuprov.sandbox.standins.catalogue import CATALOGUE

RECORDED = Path(__file__).resolve().parents[1] / "recorded"

_VERSION = r"(\d+(?:\.\d+)+)"
# What names a driver release in the recordings, each pattern with the version as its one group.
DRIVER_PATTERNS = (
    re.compile(rf"NVIDIA-SMI {_VERSION}"),
    re.compile(rf"Driver Version\s*:?\s+{_VERSION}"),  # the summary header and `nvidia-smi -q`
    re.compile(rf"NVML library version: {_VERSION}"),  # a version mismatch: the library's, as NVML cuts it
    re.compile(rf"Kernel Module(?: for \w+)?\s+{_VERSION}"),  # /proc/driver/nvidia/version, NVRM log lines
    re.compile(rf"^nvidia[/,] ?{_VERSION},", re.MULTILINE),  # `dkms status` (DKMS 2 and 3)
    re.compile(rf'"driver": "{_VERSION}"'),  # gpuprov bench results
)
CUDA_PATTERN = re.compile(r"CUDA Version\s*:?\s+(\d+\.\d+)\b")  # the newest CUDA the driver supports
PYTORCH_PATTERNS = (re.compile(r'"torch": "([\d.]+)\+(\w+)"'), re.compile(r"^([\d.]+)\+(cu\d+|cpu) ", re.M))
NCCL_PATTERNS = (re.compile(r"NCCL version ([\d.]+)\+cuda(\d+\.\d+)"), re.compile(r'"nccl": "([\d.]+)"'))

# Releases recorded that a lock cannot name, each with why. Keep each reason true: the tests below fail
# when one becomes nameable or is no longer recorded.
NOT_LOCKABLE: dict[tuple[str, str], str] = {
    ("driver", "384.98"): "R384 (2017, CUDA 9): no CUDA row fits it, the table starts at CUDA 12.2",
    ("driver", "460.91.03"): "R460 (CUDA 11): no CUDA row fits it, the table starts at CUDA 12.2",
    ("driver", "470.256.02"): "R470 (CUDA 11, end of life): no CUDA row fits it, the table starts at 12.2",
    ("driver", "510.73.08"): "R510 (CUDA 11.6): no CUDA row fits it, the table starts at CUDA 12.2",
    ("driver", "525.60.11"): (
        "R525's Linux release (the data-center one, bundled with CUDA 12.0 GA, is 525.60.13): no CUDA row "
        "fits R525, CUDA 12.2.2 needs >= 535.104.05"
    ),
    ("driver", "535.86.05"): (
        "the Linux (XFree86) build of 535.86; the data-center release is 535.86.10, which the table lists"
    ),
    ("driver", "550.78"): "a GeForce/Linux release: not in the driver container's versions.mk nor a runfile",
    ("driver", "550.135"): "a GeForce/Linux release: not in the driver container's versions.mk nor a runfile",
    ("driver", "555.42.02"): (
        "R555 (new feature branch, CUDA 12.5): no source for a 555 data-center release was found, and the "
        "table has no CUDA 12.5"
    ),
    ("driver", "580.105.06"): (
        "a vGPU host driver (its CUDA Version reads Not Found): installed with NVIDIA's vGPU software, not "
        "from the CUDA repositories the lock pins"
    ),
    ("driver", "35.3.1"): "a Jetson (L4T) module version, not a data-center driver",
    ("cuda", "11.4"): "CUDA 11: the table starts at CUDA 12.2",
    ("cuda", "11.6"): "CUDA 11 (an R510 host's -q, recorded for its ECC labels): the table starts at 12.2",
    ("cuda", "12.5"): (
        "no CUDA 12.5 row: its minimum driver (CUDA release notes Table 3) was not confirmed here, and no "
        "cuDNN, NCCL or PyTorch row of the table pairs with it"
    ),
    ("cuda", "12.7"): "no CUDA 12.7 toolkit exists: R565 drivers report 12.7 as the newest CUDA they run",
}


def _recording_files() -> Iterator[Path]:
    for path in sorted(RECORDED.rglob("*")):
        if path.is_file() and path.suffix not in {".gz", ".md"}:
            yield path


def recorded_releases() -> dict[tuple[str, str], str]:
    """(kind, release) -> the first recording naming it; kinds: driver, cuda, pytorch, nccl."""
    found: dict[tuple[str, str], str] = {}

    def add(kind: str, value: str, path: Path) -> None:
        found.setdefault((kind, value), str(path.relative_to(RECORDED)))

    for path in _recording_files():
        text = path.read_text(errors="replace")
        for pattern in DRIVER_PATTERNS:
            for version in pattern.findall(text):
                add("driver", version, path)
        for version in _csv_drivers(text):
            add("driver", version, path)
        for minor in CUDA_PATTERN.findall(text):
            add("cuda", minor, path)
        for pattern in PYTORCH_PATTERNS:
            for version, tag in pattern.findall(text):
                add("pytorch", f"{version}+{tag}", path)
        for pattern in NCCL_PATTERNS:
            for match in pattern.findall(text):
                add("nccl", "+cuda".join(match) if isinstance(match, tuple) else match, path)
    return found


def _csv_drivers(text: str) -> list[str]:
    """The driver_version column of an `nvidia-smi --query-gpu ... --format=csv` output."""
    if "driver_version" not in text:
        return []
    rows = csv.DictReader(text.splitlines(), skipinitialspace=True)
    return [row["driver_version"] for row in rows if re.fullmatch(_VERSION, row.get("driver_version") or "")]


def mirror_releases() -> dict[tuple[str, str], str]:
    """The sandbox mirror's package index: the stand-in catalogue's releases and its torch wheel."""
    where = "the sandbox mirror (gpuprov.sandbox.standins.catalogue)"
    found = {("driver", d.version): where for d in CATALOGUE.drivers}
    found |= {("cuda", c.short): where for c in CATALOGUE.cuda}
    found |= {("cuda_release", c.version): where for c in CATALOGUE.cuda}
    found |= {("cudnn", c.version): where for c in CATALOGUE.cudnn}
    found |= {("nccl", f"{n.version}+cuda{n.cuda}"): where for n in CATALOGUE.nccl}
    for requirement in mirror.WHEELS.requirements:
        name, _, pinned = requirement.partition("==")
        if name == "torch":
            found[("pytorch", pinned)] = f"the sandbox mirror's wheel index ({requirement})"
    return found


def lockable(kind: str, value: str, table: dict[str, Any]) -> bool:
    """Whether a lock can name this release with the table."""
    versions = {k: [str(r["version"]) for r in table[k]] for k in ("drivers", "cuda", "cudnn", "nccl")}
    if kind == "driver":  # NVML cuts a version to two parts: any listed release it is the start of
        return value in versions["drivers"] or any(v.startswith(f"{value}.") for v in versions["drivers"])
    if kind == "cuda":
        return any(lock._minor(v) == value for v in versions["cuda"])
    if kind == "cuda_release":
        return value in versions["cuda"]
    if kind == "cudnn":
        return value in versions["cudnn"]
    if kind == "nccl":
        version, _, build = value.partition("+cuda")
        rows = [r for r in table["nccl"] if str(r["version"]) == version]
        return bool(rows) and (not build or any(build in map(str, r["cuda_builds"]) for r in rows))
    version, _, tag = value.partition("+")
    return any(str(r["version"]) == version and tag in r["cuda_tags"] for r in table["pytorch"])


def test_the_scan_finds_what_the_recordings_are_known_to_hold() -> None:
    found = recorded_releases()
    for release in [
        ("driver", "580.159.04"),  # the lent H100: nvidia-smi, /proc, the bench result
        ("driver", "580.105.08"),
        ("driver", "580.126.09"),
        ("driver", "580.178"),  # NVML's cut version in a mismatch
        ("driver", "570.86.15"),  # a --query-gpu CSV
        ("driver", "535.86.05"),  # dkms status
        ("cuda", "13.0"),
        ("pytorch", "2.11.0+cu130"),
        ("nccl", "2.28.9+cuda13.0"),
    ]:
        assert release in found, release


@pytest.mark.parametrize(
    "source", [recorded_releases, mirror_releases], ids=["tests/recorded", "the sandbox mirror"]
)
def test_every_recorded_release_is_one_a_lock_can_name(
    source: Callable[[], dict[tuple[str, str], str]],
) -> None:
    table = dict(lock.load_table())
    missing = [
        f"{kind} {value} ({where})"
        for (kind, value), where in sorted(source().items())
        if (kind, value) not in NOT_LOCKABLE and not lockable(kind, value, table)
    ]
    assert missing == [], (
        "recorded releases a lock cannot name: add each to playbooks/vars/gpu_stack_compat.yml with its "
        "source, or to NOT_LOCKABLE with the reason"
    )


def test_every_reason_a_release_is_not_lockable_still_holds() -> None:
    table = dict(lock.load_table())
    found = recorded_releases() | mirror_releases()
    stale = [release for release in NOT_LOCKABLE if release not in found or lockable(*release, table)]
    assert stale == []


def test_an_unlisted_recorded_release_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a recording of a driver the table does not list is reported."""
    (tmp_path / "summary").write_text(
        "| NVIDIA-SMI 999.1.2    Driver Version: 999.1.2    CUDA Version: 99.9 |\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "RECORDED", tmp_path)
    table = dict(lock.load_table())
    found = recorded_releases()
    assert found == {("driver", "999.1.2"): "summary", ("cuda", "99.9"): "summary"}
    assert not lockable("driver", "999.1.2", table) and not lockable("cuda", "99.9", table)
