"""What `gpuprov check` refuses before any host is contacted (exit 2, one line), and what an unreachable host
gives: the hosts here are 127.0.0.1 on closed ports (1, 2), so every SSH connection is refused at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts
from gpuprov.check import options
from gpuprov.check.variables import check_extra_vars
from gpuprov.errors import BadInput
from tests.unit.bad_input.commands import one_error
from tests.unit.bad_input.commands import real_gpuprov as gpuprov

LOCK = (
    "gpu_stack:\n  driver_branch: '550'\n  driver_version: '550.127.08'\n  driver_flavor: open\n"
    "  cuda_version: '12.4.1'\n  cudnn_version: '9.5.1.17'\n  nccl_version: '2.21.5'\n"
    "  pytorch_version: '2.13.0'\n  pytorch_cuda_tag: cpu\n"
)


@pytest.fixture
def work(work: Path) -> Path:
    """conftest's two refusing hosts, with a lock in group_vars."""
    (work / "group_vars" / "all").mkdir(parents=True)
    (work / "group_vars" / "all" / "gpu_stack.yml").write_text(LOCK)
    return work


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--only", "gpu,torch"], "--only: no check named 'gpu'"),
        (["--skip", ""], "--skip is empty"),
        (["-e", "not a pair"], "give KEY=VALUE or @FILE"),
        (["-e", "gpu_stack={}"], "the lock does not fit"),
        (["--limit", "node9"], "node9"),
        (["missing.ini"], "does not exist"),
    ],
)
def test_bad_input_exits_2_before_any_host(work: Path, args: list[str], says: str) -> None:
    inventory = [] if any(a.endswith(".ini") for a in args) else ["inventory.ini"]
    proc = gpuprov("check", *inventory, *args, cwd=work)
    assert says in one_error(proc, 2)
    assert not (work / "state" / "checks").exists()  # nothing recorded, no host contacted


def test_no_lock_is_bad_input(work: Path) -> None:
    (work / "group_vars" / "all" / "gpu_stack.yml").unlink()
    assert "has no gpu_stack" in one_error(gpuprov("check", "inventory.ini", cwd=work), 2)


def test_unreachable_hosts_fail_and_are_recorded(work: Path) -> None:
    proc = gpuprov("check", "inventory.ini", "--json", "--quick", cwd=work)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert [(r["check"], r["host"], r["status"]) for r in summary["results"]] == [
        ("ssh", "node1", "fail"),
        ("ssh", "node2", "fail"),
    ]
    assert "connect" in summary["results"][0]["detail"]
    saved = list((work / "state" / "checks").glob("*/results.json"))
    assert len(saved) == 1 and json.loads(saved[0].read_text())["exit_code"] == 1


# The numbers check reads from -e or the inventory: each refused before any host is contacted (exit 2).
NUMBER_VARIABLES = ["gpuprov_check_min_busbw_gbps", "gpuprov_check_ib_rate_gbps"]
NOT_POSITIVE_NUMBERS = ["nan", "inf", "-inf", "abc", "-1", "0", "", "true", "[1]"]


@pytest.mark.parametrize("variable", NUMBER_VARIABLES)
@pytest.mark.parametrize("value", NOT_POSITIVE_NUMBERS)
def test_a_threshold_that_is_not_a_positive_number_is_refused_from_e(
    work: Path, variable: str, value: str
) -> None:
    error = one_error(gpuprov("check", "inventory.ini", "-e", f"{variable}={value}", cwd=work), 2)
    assert f"-e {variable}" in error and "a number above 0" in error, error
    assert not (work / "state" / "checks").exists()


@pytest.mark.parametrize("variable", NUMBER_VARIABLES)
@pytest.mark.parametrize("value", ["nan", "abc", "-1", "inf"])
def test_a_threshold_that_is_not_a_positive_number_is_refused_from_the_inventory(
    work: Path, variable: str, value: str
) -> None:
    (work / "group_vars" / "all" / "numbers.yml").write_text(f"{variable}: '{value}'\n")
    error = one_error(gpuprov("check", "inventory.ini", cwd=work), 2)
    assert "host node1" in error and variable in error and "a number above 0" in error, error
    assert not (work / "state" / "checks").exists()


@pytest.mark.parametrize("value", ["abc", "-3", "1.5", "true", "8.0", "", "1e3"])
def test_gpu_count_that_is_not_a_whole_number_is_refused(work: Path, value: str) -> None:
    """launch's rule (gpuprov.hosts.gpu_count), from -e and from the inventory alike."""
    error = one_error(gpuprov("check", "inventory.ini", "-e", f"gpuprov_gpu_count={value}", cwd=work), 2)
    assert "-e gpuprov_gpu_count" in error and "whole number of GPUs" in error, error
    shown = value or "''"  # YAML's empty string
    (work / "group_vars" / "all" / "count.yml").write_text(f"gpuprov_gpu_count: {shown}\n")
    error = one_error(gpuprov("check", "inventory.ini", cwd=work), 2)
    assert "host node1" in error and "whole number of GPUs" in error, error
    assert not (work / "state" / "checks").exists()


@pytest.mark.parametrize(
    ("args", "left_out"),
    [
        (["--quick", "--only", "ports"], "ports"),
        (["--quick", "--only", "bandwidth,ports"], "bandwidth, ports"),
        (["--only", "ssh", "--skip", "ssh"], "ssh"),
        (["--only", "gpu-count,xid", "--skip", "xid,gpu-count"], "gpu-count, xid"),
        (["--skip", ",".join(options.ALL_NAMES)], "ssh"),
    ],
)
def test_options_that_leave_no_check_are_refused(work: Path, args: list[str], left_out: str) -> None:
    error = one_error(gpuprov("check", "inventory.ini", *args, cwd=work), 2)
    assert "no check left to run" in error and left_out in error, error
    assert not (work / "state" / "checks").exists()


@pytest.mark.parametrize(
    "setting",
    [
        "ansible_port=99999",
        "ansible_port=2222",
        "ansible_ssh_port=22",
        "ansible_host=10.0.0.9",
        "ansible_user=root",
        "ansible_ssh_private_key_file=/tmp/key",
    ],
)
def test_connection_settings_from_e_are_refused(work: Path, setting: str) -> None:
    """check's hosts are reached as the inventory says (so is the bandwidth test's launch, which has no -e):
    -e cannot change how, and says so rather than being ignored."""
    error = one_error(gpuprov("check", "inventory.ini", "-e", setting, cwd=work), 2)
    name = setting.split("=")[0]
    assert f"-e {name}" in error and "inventory" in error, error
    assert not (work / "state" / "checks").exists()


class _Reads(dict[str, Any]):
    """A host's variables that note every name read."""

    read: set[str]

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


def test_connection_variables_are_every_one_the_host_record_reads() -> None:
    values = _Reads()
    values.read = set()
    hosts._host("node1", values)
    assert values.read <= set(hosts.CONNECTION_VARIABLES), values.read - set(hosts.CONNECTION_VARIABLES)


@pytest.mark.parametrize("value", ["abc", "-3", -3, 1.5, "1.5", 8.0, True, "true", "", " ", "1e3", "٣", [8]])
def test_launch_and_check_share_one_gpu_count_rule(value: Any) -> None:
    with pytest.raises(ValueError, match="not a whole number of GPUs"):
        hosts.gpu_count({"gpuprov_gpu_count": value})


@pytest.mark.parametrize(("value", "count"), [(0, 0), (8, 8), ("8", 8), (" 4 ", 4), (None, None)])
def test_gpu_count_takes_whole_numbers(value: Any, count: int | None) -> None:
    assert hosts.gpu_count({} if value is None else {"gpuprov_gpu_count": value}) == count


@pytest.mark.parametrize(
    "setting",
    [
        "ansible_become_password=x",
        "ansible_become=true",
        "ansible_ssh_common_args=-o ProxyJump=login",
        "ansible_ssh_extra_args=-o ServerAliveInterval=30",
    ],
)
def test_settings_check_does_not_use_pass_through_e(setting: str) -> None:
    """One vars file for every verb (-e @site.yml): become and ssh arguments gpuprov's SSH layer does not
    read change nothing check does, so they are accepted."""
    name, _, value = setting.partition("=")
    check_extra_vars({name: value})


@pytest.mark.parametrize(
    "setting",
    ["ansible_port=2222", "ansible_ssh_common_args=-o UserKnownHostsFile=/tmp/kh"],
)
def test_settings_that_change_how_a_host_is_reached_stay_refused(setting: str) -> None:
    name, _, value = setting.partition("=")
    with pytest.raises(BadInput, match=f"-e {name}"):
        check_extra_vars({name: value})
