"""NCCL_IB_HCA against a host's RDMA devices: NCCL's selection rules (nccl src/transport/net_ib.cc,
ncclIbInit) and what probe.py rdma reads on a host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.launch import ib_hca, preflight
from gpuprov.onhost import probe

# A DGX H100's layout: eight compute HCAs and a storage pair (names as `ibstat`/`ibv_devices` list them).
DGX = {**{f"mlx5_{i}": [1] for i in range(8)}, "mlx5_10": [1], "mlx5_11": [1]}


def test_marks_apply_to_the_whole_list() -> None:
    sel = ib_hca.parse("^=mlx5_10,mlx5_11")
    assert sel.exclude and sel.exact and sel.entries == (("mlx5_10", None), ("mlx5_11", None))
    assert ib_hca.parse("=mlx5_0:1,mlx5_1:1").entries == (("mlx5_0", 1), ("mlx5_1", 1))


def test_a_prefix_picks_every_device_it_starts_and_exact_names_only_themselves() -> None:
    assert ib_hca.picked(ib_hca.parse("mlx5_1"), DGX) == ["mlx5_1", "mlx5_10", "mlx5_11"]
    assert ib_hca.picked(ib_hca.parse("=mlx5_1,mlx5_2"), DGX) == ["mlx5_1", "mlx5_2"]
    assert ib_hca.picked(ib_hca.parse("^=mlx5_10,mlx5_11"), DGX) == [f"mlx5_{i}" for i in range(8)]
    assert ib_hca.picked(ib_hca.parse("=mlx5_0:2"), DGX) == []  # no port 2


def test_unset_or_matching_values_are_no_problem() -> None:
    assert ib_hca.problem_text("gpu1", {"value": None, "devices": DGX}) is None
    assert (
        ib_hca.problem_text("gpu1", {"value": "=mlx5_0:1,mlx5_7:1", "from": "/etc/nccl.conf", "devices": DGX})
        is None
    )
    assert ib_hca.problem_text("gpu1", {"value": "^mlx5_1", "from": "x", "devices": {}}) is None


def test_a_name_the_host_lacks_is_named_with_what_it_has() -> None:
    text = ib_hca.problem_text("gpu1", {"value": "=mlx5_0,mlx5_9", "from": "/etc/nccl.conf", "devices": DGX})
    assert text is not None and text.startswith("gpu1: NCCL_IB_HCA='=mlx5_0,mlx5_9' (from /etc/nccl.conf)")
    assert "for mlx5_9 (" in text and "mlx5_0 (ports 1)" in text and "=mlx5_0:1" in text
    none = ib_hca.problem_text("gpu1", {"value": "mlx5", "from": "the environment", "devices": {}})
    assert none is not None and "no RDMA device" in none


def test_an_exclusion_of_every_device_is_a_problem() -> None:
    text = ib_hca.problem_text("gpu1", {"value": "^mlx5", "from": "the environment", "devices": DGX})
    assert text is not None and "excludes every RDMA device" in text


def test_one_host_is_not_asked() -> None:
    assert ib_hca.problems([preflight.HostCheck(host=None)]) == []  # type: ignore[arg-type]


def test_probe_reads_the_devices_and_their_ports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for device, port in (("mlx5_0", "1"), ("mlx5_1", "1")):
        (tmp_path / device / "ports" / port).mkdir(parents=True)
    monkeypatch.setattr(probe, "IB_CLASS", str(tmp_path))
    monkeypatch.setenv("NCCL_IB_HCA", "=mlx5_0")
    assert probe.rdma() == {
        "value": "=mlx5_0",
        "from": "the environment",
        "devices": {"mlx5_0": [1], "mlx5_1": [1]},
    }
    monkeypatch.setattr(probe, "IB_CLASS", str(tmp_path / "absent"))
    assert probe.rdma()["devices"] == {}


def test_probe_reads_nccl_files_as_nccl_does(tmp_path: Path) -> None:
    """NCCL_CONF_FILE's file before /etc/nccl.conf, the first line of a name winning, comments skipped; run
    as preflight runs it on a host (`python -c` with the probe's text)."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("#NCCL_IB_HCA=mlx5\nNCCL_DEBUG=WARN\nNCCL_IB_HCA==mlx5_0:1\nNCCL_IB_HCA=mlx5_1\n")
    env = {"PATH": "/usr/bin:/bin", "NCCL_CONF_FILE": str(conf), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        ["bash", "-c", preflight.probe_command(sys.executable, "rdma")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert (answer["value"], answer["from"]) == ("=mlx5_0:1", str(conf))
    assert isinstance(answer["devices"], dict)
    env["NCCL_IB_HCA"] = "mlx5_2"
    proc = subprocess.run(
        ["bash", "-c", preflight.probe_command(sys.executable, "rdma")],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=60,
    )  # fmt: skip
    assert json.loads(proc.stdout)["from"] == "the environment"


def test_a_user_without_a_passwd_entry_reads_only_the_system_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """launch --image's check container runs as the user's UID, which the image's /etc/passwd lacks:
    getpwuid fails there, and NCCL (userHomeDir) then reads no ~/.nccl.conf; the probe must not fail."""

    def no_entry(uid: int) -> None:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_IB_HCA==mlx5_0\n")
    monkeypatch.setattr(probe.pwd, "getpwuid", no_entry)
    monkeypatch.setattr(probe, "NCCL_CONF", str(conf))
    monkeypatch.delenv("NCCL_IB_HCA", raising=False)
    monkeypatch.delenv("NCCL_CONF_FILE", raising=False)
    assert probe.nccl_setting("NCCL_IB_HCA") == {"value": "=mlx5_0", "from": str(conf)}


def test_check_answers_rdma_on_its_channel(tmp_path: Path) -> None:
    """`probe.py check`, as preflight runs it: look's line, then `rdma` read from stdin and answered."""
    torch = tmp_path / "site" / "torch"
    torch.mkdir(parents=True)
    (torch / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")
    (torch / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (torch / "__init__.py").write_text("from torch import version\n__version__ = version.__version__\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(tmp_path / "site"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "NCCL_IB_HCA": "=mlx5_0",
    }
    proc = subprocess.run(
        ["bash", "-c", preflight.probe_command(sys.executable, "check")],
        input="rdma\n", capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answers = [line for line in proc.stdout.splitlines() if line.startswith(ib_hca.RDMA_ANSWER)]
    assert len(answers) == 1
    assert json.loads(answers[0][len(ib_hca.RDMA_ANSWER) :])["value"] == "=mlx5_0"


class _Answers:
    """A host check's channel that answers `rdma` with a recorded line."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.asked: list[str] = []

    def ask(self, command: str, answers: tuple[str, ...]) -> str:
        self.asked.append(command)
        return self.line


def _check(name: str, answer: dict[str, object]) -> preflight.HostCheck:
    check = preflight.HostCheck(host=hosts.Host(name, "10.0.0.2", 22, "u", None, Path("/k")))
    check.answers = _Answers(ib_hca.RDMA_ANSWER + json.dumps(answer))  # type: ignore[assignment]
    check.torch = "2.13.0+cpu"
    return check


def test_every_host_is_asked_and_launch_env_wins() -> None:
    conf: dict[str, object] = {"value": "=mlx5_0", "from": "/etc/nccl.conf", "devices": {"mlx5_0": [1]}}
    checks = [_check("node1", conf), _check("node2", {**conf, "devices": {"mlx5_1": [1]}})]
    found = ib_hca.problems(checks)
    assert [p.kind for p in found] == [preflight.NOT_READY]
    assert found[0].text.startswith("node2: NCCL_IB_HCA='=mlx5_0' (from /etc/nccl.conf)")
    assert all(c.answers.asked == ["rdma"] for c in checks)  # type: ignore[union-attr]
    found = ib_hca.problems(checks, given="=mlx5_1")
    assert [p.text.split(":")[0] for p in found] == ["node1"]
    assert "(from launch --env)" in found[0].text
