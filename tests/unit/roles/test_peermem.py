"""network_tuning's files/peermem.sh: nvidia_peermem is loaded only where the RDMA stack has the
peer-memory API (MLNX_OFED/DOCA-OFED's ib_register_peer_memory_client); on the inbox stack its init returns
-EINVAL (open-gpu-kernel-modules, kernel-open/nvidia-peermem/nvidia-peermem.c), so it is not even tried.
modinfo and modprobe are replaced by scripts on PATH that record their calls."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuprov import resources

SCRIPT = resources.data_dir("roles") / "network_tuning" / "files" / "peermem.sh"

# /proc/kallsyms lines: inbox ib_core has no peer-memory symbols; MLNX_OFED's ib_core exports them (its
# __kstrtab_ line as recorded in https://github.com/Mellanox/nv_peer_memory/issues/79, and the function's
# own line).
INBOX = "ffffffffc0a1b2c0 T ib_register_client\t[ib_core]\n"
OFED = (
    INBOX
    + "ffffffffa0de25ac r __kstrtab_ib_register_peer_memory_client\t[ib_core]\n"
    + "ffffffffa0dd1230 T ib_register_peer_memory_client\t[ib_core]\n"
)


def run(tmp_path: Path, mode: str, kallsyms: str, *, on_disk: bool = True, modprobe_rc: int = 0) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "modinfo").write_text(f"#!/bin/sh\n{'echo nvidia_peermem' if on_disk else 'exit 1'}\n")
    (bin_dir / "modprobe").write_text(
        f'#!/bin/sh\necho "$@" >> {tmp_path / "modprobe-calls"}\n'
        + (
            "exit 0\n"
            if modprobe_rc == 0
            else "echo \"modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\" >&2\nexit 1\n"
        )
    )
    for tool in ("modinfo", "modprobe"):
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "kallsyms").write_text(kallsyms)
    (tmp_path / "module").mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(
        ["sh", str(SCRIPT), mode, str(tmp_path / "kallsyms"), str(tmp_path / "module")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return proc.stdout


def modprobe_calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "modprobe-calls"
    return path.read_text().splitlines() if path.exists() else []


def test_inbox_stack_is_not_tried_and_says_why(tmp_path: Path) -> None:
    out = run(tmp_path, "load", INBOX)
    assert out.startswith("no-peer-memory ")
    assert "ib_register_peer_memory_client" in out
    assert modprobe_calls(tmp_path) == []


def test_ofed_stack_loads_it(tmp_path: Path) -> None:
    assert run(tmp_path, "load", OFED).startswith("loaded-now ")
    assert modprobe_calls(tmp_path) == ["nvidia_peermem"]


def test_a_failed_load_is_reported_with_modprobe_s_error(tmp_path: Path) -> None:
    out = run(tmp_path, "load", OFED, modprobe_rc=1)
    assert out.startswith("failed ")
    assert "Invalid argument" in out


def test_check_mode_loads_nothing(tmp_path: Path) -> None:
    assert run(tmp_path, "check", OFED).startswith("would-load ")
    assert modprobe_calls(tmp_path) == []


def test_a_loaded_module_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "module" / "nvidia_peermem").mkdir(parents=True)
    assert run(tmp_path, "load", INBOX).startswith("loaded ")
    assert modprobe_calls(tmp_path) == []


@pytest.mark.parametrize("kallsyms", [INBOX, OFED])
def test_a_driver_without_the_module(tmp_path: Path, kallsyms: str) -> None:
    assert run(tmp_path, "load", kallsyms, on_disk=False).startswith("absent ")
    assert modprobe_calls(tmp_path) == []
