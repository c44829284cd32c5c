"""The stand-in programs: shellcheck reads every program file, and the packages install them filled in."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from gpuprov.sandbox import standins
from gpuprov.sandbox.standins.catalogue import DriverRelease
from gpuprov.sandbox.standins.drivers import _nvidia_smi
from gpuprov.sandbox.standins.shell import GPUS_CONF, PROGRAMS, program

PROGRAM_FILES = sorted(p.name for p in PROGRAMS.iterdir() if p.name.endswith(".sh"))


def test_the_programs_are_there():
    assert {"nvidia-smi.sh", "gpus-conf.sh", "conda.sh", "conda-installer.sh"} <= set(PROGRAM_FILES)


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck is not installed (scripts/setup.sh)"
)
@pytest.mark.parametrize("name", PROGRAM_FILES)
def test_shellcheck_finds_nothing(name: str):
    # -x with SCRIPTDIR follows `. ./gpus-conf.sh`, so the variables it sets count as set.
    path = PROGRAMS / name
    result = subprocess.run(
        ["shellcheck", "--external-sources", "--source-path=SCRIPTDIR", "--format=gcc", str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def installed_programs() -> list[tuple[str, str]]:
    packages = standins.deb_packages(standins.CATALOGUE) + standins.rpm_packages(standins.CATALOGUE)
    files = [
        (f"{p.name} {e.path}", e.content.decode())
        for p in packages
        for e in p.entries
        if isinstance(e, standins.File) and e.content.startswith(b"#!/bin/sh")
    ]
    return [*files, ("conda installer", standins.conda_installer().decode())]


def test_installed_programs_are_filled_in_whole():
    programs = installed_programs()
    assert len({path for path, _ in programs}) > 10
    for where, text in programs:
        assert not re.search(r"@[A-Z_]+@", text), where
        assert not re.search(r"^\s*# shellcheck ", text, re.MULTILINE), where
        assert not re.search(r"^\. \./", text, re.MULTILINE), where


def test_the_gpu_settings_are_included_where_a_program_sources_them():
    smi = _nvidia_smi(DriverRelease(branch="550", version="550.1.2", cuda="12.4")).content.decode()
    assert f'CONF="${{GPUPROV_STANDIN_GPUS_CONF:-{GPUS_CONF}}}"\n' in smi
    assert '\n    . "$CONF"\n    HAVE_GPUS=1\n' in smi


def test_the_conda_script_is_carried_by_the_installer():
    installer = standins.conda_installer().decode()
    conda = program("conda.sh", VERSION=standins.CONDA_VERSION).decode()
    assert f"<<'CONDA_SCRIPT'\n{conda}CONDA_SCRIPT\n" in installer


def test_a_placeholder_without_a_value_is_refused():
    with pytest.raises(ValueError, match="no value for \\['VERSION'\\]"):
        program("nv-hostengine.sh")
    with pytest.raises(ValueError, match="no placeholder for \\['CUDA'\\]"):
        program("nv-hostengine.sh", VERSION="3.3.9", CUDA="12.4")
