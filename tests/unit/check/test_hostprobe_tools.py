"""The real hostprobe program (`python3 -c PROGRAM collect`, as check sends it) run here, with stand-in tools
on PATH: what a host's tools print or do must not cost the whole host its checks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpuprov import onhost
from gpuprov.check import gpu_checks
from gpuprov.check.host_view import HostView
from gpuprov.check.results import Status

RECORDED = Path(__file__).parents[2] / "recorded"
XID_LOG = (RECORDED / "dmesg-xid" / "dmesg-bumblebee").read_bytes()


def tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def collect(bin_dir: Path, **request: Any) -> dict[str, Any]:
    """hostprobe's collect with bin_dir first on PATH; its one JSON object (the program must exit 0)."""
    proc = subprocess.run(
        [sys.executable, "-c", onhost.program("hostprobe.py"), "collect"],
        input=json.dumps(request).encode(),
        capture_output=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(bin_dir)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    data = json.loads(proc.stdout.decode().splitlines()[-1])
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    "line",
    [
        b"[   12.345678] r8169 0000:03:00.0 eth0: Link is Up, caf\xe9 (Latin-1)\n",
        b"[   12.345678] NVRM: GPU Board Serial Number: \xff\xfe\n",  # an NVRM line itself
        b"[   12.345678] usb 1-1: Manufacturer: \xc3\n",  # a cut UTF-8 sequence
    ],
)
def test_a_kernel_log_not_in_utf8_is_read_with_replacement(tmp_path: Path, line: bytes) -> None:
    (tmp_path / "dmesg.txt").write_bytes(line + XID_LOG)
    tool(tmp_path, "dmesg", f"cat {tmp_path / 'dmesg.txt'}\n")
    data = collect(tmp_path)
    log = data["kernel_log"]
    assert log["rc"] == 0 and log["tool"] == "dmesg"
    view = HostView("node1", {"gpuprov_gpu_count": 1}, data)
    result = gpu_checks.xid_events(view)[0]
    assert result.status is not Status.COULD_NOT_RUN and "31" in result.measured, result


def test_a_journal_without_kernel_lines_is_not_read_as_a_quiet_kernel(tmp_path: Path) -> None:
    """A user outside adm/systemd-journal gets exit 0 and nothing from `journalctl -k -q` (systemd shows
    only the user's own journal): check must say it could not read the log, not pass "none since boot"."""
    tool(tmp_path, "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1\n")
    tool(tmp_path, "sudo", "echo 'sudo: a password is required' >&2; exit 1\n")
    tool(tmp_path, "journalctl", "exit 0\n")
    data = collect(tmp_path)
    assert data["kernel_log"]["rc"] is None, data["kernel_log"]
    view = HostView("node1", {"gpuprov_gpu_count": 1}, data)
    assert gpu_checks.xid_events(view)[0].status is Status.COULD_NOT_RUN


@pytest.mark.parametrize("where", ["stdout", "stderr"])
def test_any_tool_output_not_in_utf8_is_read_with_replacement(tmp_path: Path, where: str) -> None:
    redirect = "" if where == "stdout" else " >&2"
    for name in ("nvidia-smi", "ibstat", "dkms", "systemctl"):
        tool(tmp_path, name, f"printf 'Product Name : Tesla \\351\\n'{redirect}\n")
    data = collect(tmp_path)
    for key in ("smi_q", "ibstat", "dkms", "fabricmanager"):
        assert data[key]["rc"] == 0 and "Tesla \ufffd" in data[key][where], data[key]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (not yet reaped by its parent) is dead for this purpose.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[-1][:1] != "Z"


def test_a_hung_nvidia_smi_is_killed_with_its_children_and_could_not_run(tmp_path: Path) -> None:
    """The stand-in hangs as nvidia-smi does on a stuck GPU, and has a child (as nvidia-smi's helpers)."""
    pids = tmp_path / "pids"
    tool(tmp_path, "nvidia-smi", f"echo $$ >> {pids}; sleep 300 & echo $! >> {pids}; wait\n")
    started = time.monotonic()
    try:
        data = collect(tmp_path, tool_timeout=1)
        assert time.monotonic() - started < 60
        assert data["smi_q"]["timeout"] == 1 and data["smi_q"]["rc"] is None
        assert data["smi_nvlink"]["timeout"] == 1
        assert len(pids.read_text().split()) == 2, "nvidia-smi was started again after it hung"
        time.sleep(0.5)
        left = [int(p) for p in pids.read_text().split() if _alive(int(p))]
        assert left == [], "the hung nvidia-smi (or its child) was left running"
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    result = gpu_checks.gpu_count(HostView("node1", {"gpuprov_gpu_count": 1}, data))[0]
    assert result.status is Status.COULD_NOT_RUN, result
    assert "hung" in result.action and "mismatch" not in result.action, result.action


def _gpu_results(data: dict[str, Any]) -> dict[str, Any]:
    from gpuprov.check import version_checks

    view = HostView("node1", {"gpuprov_gpu_count": 1}, data)
    found = gpu_checks.gpu_count(view) + gpu_checks.matmul(view) + version_checks.python_env(view)
    return {r.check: r for r in found}


def test_after_nvidia_smi_hung_no_other_gpu_probe_is_started(tmp_path: Path) -> None:
    """A stuck driver hangs the CUDA env probe and the matmul as it hung nvidia-smi, each leaving one more
    process the kernel cannot kill: they are not started, and say why."""
    pids, started = tmp_path / "pids", tmp_path / "python-started"
    tool(tmp_path, "nvidia-smi", f"echo $$ >> {pids}; exec sleep 300\n")
    tool(tmp_path, "envpython", f"touch {started}; exec sleep 300\n")
    try:
        data = collect(tmp_path, tool_timeout=1, python=str(tmp_path / "envpython"))
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert data["smi_q"]["timeout"] == 1
    assert not started.exists(), "the env probe was started after nvidia-smi hung"
    why = "nvidia-smi hung: the GPU probes were not started"
    assert data["env"]["skipped"] == why and data["matmul"]["skipped"] == why
    results = _gpu_results(data)
    for check in ("matmul", "torch"):
        assert results[check].status is Status.COULD_NOT_RUN and why in results[check].detail, results[check]


def _proc_entry(root: Path, pid: int, comm: str, state: str) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194560 0 0\n")


def test_an_nvidia_smi_stuck_in_the_kernel_from_an_earlier_run_stops_the_gpu_probes(tmp_path: Path) -> None:
    """An nvidia-smi of an earlier run still in state D: the driver is hung; another would hang too."""
    proc = tmp_path / "proc"
    _proc_entry(proc, 4242, "nvidia-smi", "D")
    _proc_entry(proc, 4243, "nvidia-smi", "S")  # running normally: not stuck
    _proc_entry(proc, 4244, "a) D (x", "D")  # a name with ") D" in it: not nvidia-smi
    (proc / "self").mkdir()
    smi_started, env_started = tmp_path / "smi-started", tmp_path / "python-started"
    tool(tmp_path, "nvidia-smi", f"touch {smi_started}\n")
    tool(tmp_path, "envpython", f"touch {env_started}\n")
    data = collect(tmp_path, tool_timeout=1, python=str(tmp_path / "envpython"), proc_root=str(proc))
    assert not smi_started.exists() and not env_started.exists()
    results = _gpu_results(data)
    for check in ("gpu-count", "matmul", "torch"):
        result = results[check]
        assert result.status is Status.COULD_NOT_RUN and "pid 4242" in result.detail, result
        assert "4243" not in result.detail and "4244" not in result.detail, result
    assert "reboot" in results["gpu-count"].action and "install" not in results["gpu-count"].action
