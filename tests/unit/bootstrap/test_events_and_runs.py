"""Folding runner events into per-host results; run directories and their rotation; OS support."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuprov import host_preflight as preflight
from gpuprov.ansible import runs
from gpuprov.ansible.events import Tracker, failure_message
from gpuprov.errors import ExitCode


def event(kind: str, **data: object) -> dict[str, object]:
    return {"event": kind, "event_data": data}


def test_tracker_counts_current_task_failures_and_versions() -> None:
    tracker = Tracker(["n1", "n2"])
    tracker.handle(event("playbook_on_play_start", play="Install"))
    tracker.handle(event("runner_on_start", host="n1", task="Install the driver", role="nvidia_driver"))
    assert tracker.hosts["n1"].task == "nvidia_driver : Install the driver"
    tracker.handle(event("runner_on_ok", host="n1", task="Install the driver", res={"changed": True}))
    tracker.handle(event("runner_on_ok", host="n1", task="x", res={"changed": False}))
    tracker.handle(event("runner_on_skipped", host="n2", task="x"))
    tracker.handle(event("runner_on_failed", host="n2", task="Probe", ignore_errors=True, res={"msg": "meh"}))
    tracker.handle(event("runner_on_failed", host="n2", task="Install CUDA", res={"msg": "No package cuda"}))
    tracker.handle(
        event(
            "runner_on_ok",
            host="n1",
            task="Publish",
            res={"ansible_facts": {"gpuprov_verified": {"cuda": "12.4.1"}}},
        )
    )
    tracker.handle(
        event(
            "runner_on_ok",
            host="n1",
            task="Publish",
            res={"ansible_facts": {"gpuprov_verified": {"nccl": "2.21.5"}}},
        )
    )
    n1, n2 = tracker.hosts["n1"], tracker.hosts["n2"]
    assert (n1.ok, n1.changed, n1.failed, n1.status) == (4, 1, 0, "changed")
    assert (n2.ok, n2.failed, n2.skipped, n2.ignored, n2.status) == (0, 1, 1, 1, "failed")
    assert [t.as_dict() for t in n2.failed_tasks] == [
        {"task": "Install CUDA", "message": "No package cuda", "unreachable": False}
    ]
    assert n1.versions == {"cuda": "12.4.1", "nccl": "2.21.5"}


def test_stats_replace_live_counts_and_carry_set_stats_versions() -> None:
    tracker = Tracker(["n1"])
    tracker.handle(
        event("runner_on_unreachable", host="n1", task="Gathering Facts", res={"msg": "timed out"})
    )
    tracker.handle(
        event(
            "playbook_on_stats",
            ok={"n1": 10, "localhost": 2},
            changed={"n1": 3},
            failures={},
            dark={"n1": 1},
            skipped={"n1": 4},
            processed={"n1": 1, "localhost": 1},
            artifact_data={"gpuprov_verified": {"n1": {"driver": "550.127.08"}, "ghost": {"x": 1}}},
        )
    )
    n1 = tracker.hosts["n1"]
    assert (n1.ok, n1.changed, n1.unreachable, n1.skipped, n1.finished) == (10, 3, 1, 4, True)
    assert n1.status == "unreachable"
    assert n1.failed_tasks[0].unreachable and n1.failed_tasks[0].message == "timed out"
    assert n1.versions == {"driver": "550.127.08"}
    assert "ghost" not in tracker.hosts


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ({"msg": "Package not found."}, "Package not found"),
        (
            {"msg": "non-zero return code", "rc": 2, "stderr": "line one\nE: Unable to locate package x\n"},
            "non-zero return code; stderr: E: Unable to locate package x; rc=2",
        ),
        ({"module_stderr": "Traceback...\nKeyError: 'x'\n"}, "module_stderr: KeyError: 'x'"),
        (
            {
                "msg": "One or more items failed",
                "results": [{"item": "a"}, {"item": "b", "failed": True, "msg": "no b"}],
            },
            "One or more items failed; item 'b': no b",
        ),
        (
            {
                "msg": "Failed to install some of the specified packages",
                "failures": ["No package python3-dnf-plugin-versionlock available."],
                "rc": 1,
                "results": [],
            },
            "Failed to install some of the specified packages; No package python3-dnf-plugin-versionlock "
            "available; rc=1",
        ),
        ({}, "failed (no message; see the run log)"),
    ],
)
def test_failure_message(result: dict[str, object], message: str) -> None:
    assert failure_message(result) == message


def test_long_failure_messages_are_cut() -> None:
    assert len(failure_message({"msg": "x" * 5000})) == 400


def test_run_dirs_rotate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path))
    root = runs.runs_dir()
    for index in range(runs.KEEP_RUNS + 3):
        (root / f"20240101-0000{index:02d}-aaaaaa").mkdir(parents=True)
    run = runs.RunDir()
    run.log("hello")
    summary = run.write_summary({"status": "ok"})
    run.close()
    left = sorted(p.name for p in root.iterdir())
    assert len(left) == runs.KEEP_RUNS
    assert run.id in left
    assert left[0] == "20240101-000004-aaaaaa"  # the four oldest went
    assert json.loads(summary.read_text()) == {"status": "ok"}
    assert "hello" in (run.path / runs.LOG).read_text()
    assert (run.path.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize(
    ("os_release", "name", "problem"),
    [
        ('NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n', "Ubuntu 22.04", None),
        ('NAME="Ubuntu"\nVERSION_ID="20.04"\nID=ubuntu\n', "Ubuntu 20.04", None),
        ('NAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n', "Debian GNU/Linux 12", None),
        ('NAME="Rocky Linux"\nVERSION_ID="9.4"\nID="rocky"\n', "Rocky Linux 9.4", None),
        ('NAME="Rocky Linux"\nVERSION_ID="8.10"\nID="rocky"\n', "Rocky Linux 8.10", None),
        ('NAME="Ubuntu"\nVERSION_ID="18.04"\nID=ubuntu\n', "Ubuntu 18.04", "Ubuntu 18.04 is not supported"),
        ('NAME="Debian GNU/Linux"\nVERSION_ID="11"\nID=debian\n', "Debian GNU/Linux 11", "is not supported"),
        (
            'NAME="CentOS Linux"\nVERSION_ID="7"\nID="centos"\n',
            "CentOS Linux 7",
            "CentOS Linux 7 is not supported",
        ),
        ("", "", "/etc/os-release is missing or has no ID"),
    ],
)
def test_supported_os(os_release: str, name: str, problem: str | None) -> None:
    shown, found = preflight.check_os(os_release)
    assert shown == name
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found and preflight.SUPPORTED_TEXT in found


def test_os_repository_without_the_locked_cuda_is_a_host_not_ready() -> None:
    from gpuprov.sandbox.inventory import SANDBOX_LOCK

    noble = preflight.HostReport("node2", "Ubuntu 24.04", (), ("ubuntu", "24.04"))
    bookworm = preflight.HostReport("node1", "Debian GNU/Linux 12", (), ("debian", "12"))
    reports = [
        preflight.check_os_repository(bookworm, SANDBOX_LOCK),
        preflight.check_os_repository(noble, SANDBOX_LOCK),
    ]
    assert reports[0].problems == ()
    (problem,) = reports[1].problems
    assert (problem.host, problem.check) == ("node2", "os")
    assert problem.message.startswith("Ubuntu 24.04: NVIDIA's ubuntu2404 repository has no CUDA 12.4.1")
    assert "it carries CUDA 12.6.3, 12.8.1" in problem.message
    assert preflight.exit_code(reports, []) == ExitCode.PREFLIGHT_FAILED
    # A host whose OS is already refused gets no second line.
    refused = preflight.HostReport(
        "node3", "Ubuntu 18.04", (preflight.Problem("node3", "os", "x"),), ("ubuntu", "18.04")
    )
    assert preflight.check_os_repository(refused, SANDBOX_LOCK) == refused


def test_a_host_without_a_python_for_the_locked_pytorch_is_refused_before_anything_runs() -> None:
    from gpuprov import hosts

    lock = {"gpu_stack": {"pytorch_version": "2.13.0"}}
    inventory = hosts.Inventory(
        Path("inventory.ini"),
        [
            hosts.Host("rocky", "10.0.0.2", 22, "u", None, Path("kh"), vars=dict(lock)),
            hosts.Host(
                "pinned",
                "10.0.0.3",
                22,
                "u",
                None,
                Path("kh"),
                vars={**lock, "python_env_python_version": "3.9"},
            ),
        ],
    )
    reports = [
        preflight.check_python(
            preflight.HostReport(name, "Rocky Linux 9.4", (), ("rocky", "9.4")), inventory, {}
        )
        for name in ("rocky", "pinned")
    ]
    assert reports[0].problems == ()
    (problem,) = reports[1].problems
    assert (problem.host, problem.check) == ("pinned", "python_env")
    assert "would fit: 3.12 (python3.12), 3.11 (python3.11)" in problem.message
    assert preflight.exit_code(reports, []) == ExitCode.PREFLIGHT_FAILED
    # -e wins over the inventory, as for Ansible.
    fixed = preflight.HostReport("pinned", "Rocky Linux 9.4", (), ("rocky", "9.4"))
    assert preflight.check_python(fixed, inventory, {"python_env_python_version": "3.11"}).problems == ()
