"""`gpuprov lock check LOCK [INVENTORY]` in this process (tests/unit/in_process.py): the table checks alone,
bad input in one line, and with an inventory the preflight of every host, its hosts faked (no SSH)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuprov import host_preflight, hosts
from gpuprov.gpu_generations import PciGpu
from tests.locks import CUDA13
from tests.unit import in_process


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "lock.yml").write_text(yaml.safe_dump({"gpu_stack": CUDA13}))
    (tmp_path / "inventory.ini").write_text("[gpu_nodes]\nnode1\nnode2\n")
    return tmp_path


def lock_check(*args: str, cwd: Path) -> in_process.Result:
    return in_process.gpuprov("lock", "check", *args, cwd=cwd, env={"GPUPROV_STATE_DIR": str(cwd / "state")})


def one_error(result: in_process.Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0].removeprefix("error: ")


def test_without_an_inventory_only_the_table_is_checked(tmp_path: Path) -> None:
    (tmp_path / "lock.yml").write_text(yaml.safe_dump({"gpu_stack": CUDA13}))
    result = lock_check("lock.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "The lock fits gpuprov's compatibility table" in result.stderr
    assert "only the table was checked" in result.stderr


def test_a_lock_of_bare_fields_is_read_too(tmp_path: Path) -> None:
    (tmp_path / "lock.yml").write_text(yaml.safe_dump({**CUDA13, "cuda_version": "13.9.9"}))
    result = lock_check("lock.yml", "--json", cwd=tmp_path)
    assert result.returncode == 2
    answer = json.loads(result.stdout)
    assert answer["exit_code"] == 2
    first = answer["lock_problems"][0]["message"]
    assert first.startswith("cuda_version 13.9.9 is not in gpuprov's compatibility table")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "lock file lock.yml does not exist; give a YAML file with a 'gpu_stack:' mapping"),
        ("- a\n- list\n", "lock file lock.yml is not a YAML mapping"),
        ("gpu_stack: [1, 2]\n", "lock file lock.yml: gpu_stack is not a mapping"),
        ("gpu_stack: {\n", "lock file lock.yml is not a YAML mapping"),
    ],
)
def test_a_bad_lock_file_is_one_line(tmp_path: Path, content: str | None, expected: str) -> None:
    if content is not None:
        (tmp_path / "lock.yml").write_text(content)
    assert one_error(lock_check("lock.yml", cwd=tmp_path)).startswith(expected)


def test_limit_without_an_inventory_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "lock.yml").write_text(yaml.safe_dump({"gpu_stack": CUDA13}))
    assert one_error(lock_check("lock.yml", "--limit", "node1", cwd=tmp_path)) == (
        "--limit needs an inventory: give INVENTORY (or -i INVENTORY) with it"
    )


def fake_hosts(monkeypatch: pytest.MonkeyPatch, gpus: Mapping[str, tuple[PciGpu, ...]]) -> list[str]:
    seen: list[str] = []

    def check_host(
        host: hosts.Host, extravars: Mapping[str, Any], also: object = None
    ) -> host_preflight.HostReport:
        seen.append(host.name)
        assert extravars == {"gpu_stack": CUDA13}  # the LOCK file's, whatever the inventory says
        return host_preflight.HostReport(
            host.name, "Ubuntu 22.04", (), ("ubuntu", "22.04"), gpus.get(host.name, ())
        )

    monkeypatch.setattr(host_preflight, "check_host", check_host)
    return seen


def test_every_host_is_checked_and_a_v100_refuses_a_cuda_13_lock(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = fake_hosts(monkeypatch, {"node2": (PciGpu("0000:18:00.0", "1db1"),)})
    result = lock_check("lock.yml", "inventory.ini", cwd=work)
    assert sorted(seen) == ["node1", "node2"]
    assert result.returncode == 7, result.stderr
    assert "Lock check: problems found" in result.stdout + result.stderr
    answer = json.loads(lock_check("lock.yml", "-i", "inventory.ini", "--json", cwd=work).stdout)
    assert answer["exit_code"] == 7
    assert answer["hosts"]["node1"]["problems"] == []
    (problem,) = answer["hosts"]["node2"]["problems"]
    assert problem["check"] == "gpu"
    assert problem["message"].startswith("1x Tesla V100 SXM2 16GB (Volta, 10de:1db1): cuda_version 13.0.2")
    assert answer["hosts"]["node2"]["gpus"] == ["10de:1db1"]


def test_hosts_that_can_take_the_lock_exit_0(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_hosts(monkeypatch, {"node1": (PciGpu("0000:18:00.0", "2330"),) * 2})
    result = lock_check("lock.yml", cwd=work)  # ./inventory.ini, the default rule
    assert result.returncode == 0, result.stderr
    assert "The lock fits all 2 host(s); nothing was changed on any host" in result.stderr
    assert "Inventory: " in result.stderr  # the default inventory is named
    limited = lock_check("lock.yml", "inventory.ini", "--limit", "node2", cwd=work)
    assert "The lock fits all 1 host(s)" in limited.stderr
