"""nvidia_driver loads a per-release vars file only where the release has one (Debian 12, EL9); every other
supported release (Ubuntu 20.04/22.04/24.04, Rocky 8) must load nothing, not fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.local.roles.local_play import ROLES, role_task, run_play

RELEASES = [  # (distribution, os_family, major version, the file the role must load or None)
    ("Ubuntu", "Debian", "20", None),
    ("Ubuntu", "Debian", "22", None),
    ("Ubuntu", "Debian", "24", None),
    ("Debian", "Debian", "12", "Debian-12.yml"),
    ("Rocky", "RedHat", "8", None),
    ("Rocky", "RedHat", "9", "RedHat-9.yml"),
    ("RedHat", "RedHat", "9", "RedHat-9.yml"),
]


@pytest.mark.parametrize(("distribution", "family", "major", "loaded"), RELEASES)
def test_each_supported_release_loads_its_own_file_or_none(
    tmp_path: Path, distribution: str, family: str, major: str, loaded: str | None
) -> None:
    task = role_task("nvidia_driver", "settings.yml", "Load the settings of the OS release")
    facts = {"distribution": distribution, "os_family": family, "distribution_major_version": major}
    proc = run_play(tmp_path, [task], {"ansible_facts": facts, "role_path": str(ROLES / "nvidia_driver")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if loaded is None:
        assert "skipping: [localhost]" in proc.stdout, proc.stdout
    else:
        assert f"/vars/{loaded}" in proc.stdout, proc.stdout
