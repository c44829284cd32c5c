"""The container toolkit's stand-ins against recorded facts: the CDI refresh units, what nvidia-ctk writes
into daemon.json, the packages' dependencies, and the libnvidia-container repository's content."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpuprov.sandbox.standins import container_toolkit
from gpuprov.sandbox.standins.catalogue import ContainerToolkitRelease
from gpuprov.sandbox.standins.model import File, Format, Pin
from gpuprov.sandbox.standins.shell import program

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "nvidia-container-toolkit"
RELEASE = ContainerToolkitRelease("1.18.0")


def _files(fmt: Format) -> dict[str, bytes]:
    return {
        e.path: e.content for p in container_toolkit(RELEASE, fmt) for e in p.entries if isinstance(e, File)
    }


@pytest.mark.parametrize("unit", ["nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"])
@pytest.mark.parametrize("fmt", [Format.DEB, Format.RPM])
def test_cdi_refresh_units_are_nvidias(unit: str, fmt: Format) -> None:
    installed = _files(fmt)[f"/etc/systemd/system/{unit}"].decode()
    directives = "".join(line for line in installed.splitlines(keepends=True) if not line.startswith("#"))
    assert directives == (RECORDED / unit).read_text()


def test_older_toolkits_have_no_refresh_units() -> None:
    files = {
        e.path for p in container_toolkit(ContainerToolkitRelease("1.17.3"), Format.DEB) for e in p.entries
    }
    assert not any("nvidia-cdi-refresh" in path for path in files)


def test_package_dependencies_follow_nvidias_control_files() -> None:
    packages = {p.name: p for p in container_toolkit(RELEASE, Format.DEB)}
    assert set(packages) == {
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
        "libnvidia-container-tools",
        "libnvidia-container1",
    }
    assert packages["nvidia-container-toolkit"].depends == (
        (Pin("nvidia-container-toolkit-base", "1.18.0-1"),),
        (Pin("libnvidia-container-tools", "1.18.0-1"),),
    )
    assert packages["libnvidia-container-tools"].depends == ((Pin("libnvidia-container1", "1.18.0-1"),),)


def _ctk(tmp_path: Path, config: str | None, *args: str) -> str:
    script = tmp_path / "nvidia-ctk"
    script.write_bytes(program("nvidia-ctk.sh", VERSION="1.18.0"))
    script.chmod(0o755)
    path = tmp_path / "daemon.json"
    if config is not None:
        path.write_text(config)
    proc = subprocess.run(
        [str(script), "runtime", "configure", "--runtime=docker", f"--config={path}", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout if "--dry-run" in args else path.read_text()


def test_runtime_configure_writes_what_the_real_one_writes(tmp_path: Path) -> None:
    assert _ctk(tmp_path, None) == (RECORDED / "daemon.json").read_text()


def test_dry_run_prints_and_keeps_the_file(tmp_path: Path) -> None:
    printed = _ctk(tmp_path, '{"storage-driver": "vfs"}', "--dry-run", "--cdi.enabled")
    assert (tmp_path / "daemon.json").read_text() == '{"storage-driver": "vfs"}'
    assert list(json.loads(printed)) == ["features", "runtimes", "storage-driver"]  # Go sorts map keys
    assert json.loads(printed)["features"] == {"cdi": True}


def test_the_roles_daemon_json_is_a_fixed_point_of_nvidia_ctk(tmp_path: Path) -> None:
    # What roles/container_runtime/tasks/docker.yml writes for the sandbox's settings.
    role_file = {
        "exec-opts": ["native.cgroupdriver=cgroupfs"],
        "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
        "storage-driver": "vfs",
        "default-runtime": "runc",
    }
    text = json.dumps(role_file, indent=4, sort_keys=True) + "\n"
    assert json.loads(_ctk(tmp_path, text, "--dry-run")) == role_file
