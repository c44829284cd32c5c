"""container_runtime's CDI refresh settings against the toolkit's recorded units: the drop-in's directives
are upstream's (v1.20.0), and the 1.18.1 trigger the lock refuses misses compressed modules where 1.18.2's
does not (tests/recorded/nvidia-container-toolkit/)."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
RECORDED = ROOT / "tests" / "recorded" / "nvidia-container-toolkit"
CDI_TASKS = ROOT / "roles" / "container_runtime" / "tasks" / "cdi.yml"

# modules.dep lines (kmod's "module: dependencies" format): the driver's module plain, and compressed as
# Ubuntu 24.04 (zstd) and EL9's DKMS (xz) install it (toolkit commit c65ac7c0: "compressed modules with
# suffixes such as .zst or .gz").
PLAIN = "updates/dkms/nvidia.ko:\n"
COMPRESSED = ["updates/dkms/nvidia.ko.zst:\n", "extra/nvidia.ko.xz:\n"]


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


def dropin() -> configparser.ConfigParser:
    tasks = yaml.safe_load(CDI_TASKS.read_text())
    content = next(t for t in tasks if t["name"].startswith("Retry the CDI refresh"))["ansible.builtin.copy"]
    text = re.sub(r"\{%.*?%\}\n?", "", content["content"])  # the After= line: only where persistenced exists
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def test_the_dropin_sets_what_upstream_set_in_1_20_0() -> None:
    upstream = unit(RECORDED / "v1.20.0" / "nvidia-cdi-refresh.service")
    ours = dropin()
    settings = {(s, k): v for s in ours.sections() for k, v in ours[s].items() if k != "After"}
    assert settings == {
        ("Unit", "StartLimitBurst"): "5",
        ("Unit", "StartLimitIntervalSec"): "10s",
        ("Service", "Restart"): "on-failure",
        ("Service", "RestartSec"): "1s",
    }
    for (section, key), value in settings.items():
        assert upstream[section][key] == value, (section, key)
    assert ours["Unit"]["After"] == "nvidia-persistenced.service"


def trigger(release: str) -> re.Pattern[str]:
    """The grep -E pattern of the release's ExecCondition, as systemd hands it to grep: systemd turns `\\\\`
    into one backslash and keeps an unknown escape such as `\\.` as it is (it warns, commit c65ac7c0)."""
    text = (RECORDED / release / "nvidia-cdi-refresh.service").read_text()
    pattern = re.search(r"^ExecCondition=/usr/bin/grep -qE '([^']+)'", text, re.M)
    assert pattern, release
    return re.compile(pattern[1].replace("\\\\", "\\"))


@pytest.mark.parametrize("line", COMPRESSED)
def test_1_18_1_misses_compressed_modules_and_1_18_2_finds_them(line: str) -> None:
    assert trigger("v1.18.1").search(PLAIN) and trigger("v1.18.2").search(PLAIN)
    assert not trigger("v1.18.1").search(line)
    assert trigger("v1.18.2").search(line)
