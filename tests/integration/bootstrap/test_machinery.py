"""gpuprov bootstrap's machinery with a small playbook in place of site.yml (fast, and able to fail or wait
on purpose): plain and live progress, the summary, failures, Ctrl-C and the run after it.

Runs on node1 and node2 of the shared sandbox (--limit); node3 stays fresh for test_site.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.integration.bootstrap.conftest import (
    LOCK,
    ROOT,
    SMALL_PLAYBOOK,
    ansible_processes,
    bootstrap,
    bootstrap_interrupted,
    command,
    exists_on,
    latest_run,
)
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration
LIMIT = ("--limit", "node1,node2", "-e", f"@{LOCK}")  # the lock passes preflight; small.yml ignores it


def test_progress_summary_and_json(deb_sandbox: Sandbox) -> None:
    secret = "hunter2-s3cret"  # an -e value: its name may be logged, never the value
    result = bootstrap(deb_sandbox, *LIMIT, "--json", "-e", f"db_password={secret}", playbook=SMALL_PLAYBOOK)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # stdout holds only the JSON
    assert summary == result.summary()
    assert summary["status"] == "ok" and summary["exit_code"] == 0
    assert sorted(summary["hosts"]) == ["node1", "node2"]
    for name in ("node1", "node2"):
        host = summary["hosts"][name]
        assert host["failed"] == 0 and host["unreachable"] == 0 and host["ok"] >= 4
        assert host["versions"]["test_marker"] == "1.0"
        assert exists_on(deb_sandbox, name, "/etc/gpuprov-test/second")
    assert not exists_on(deb_sandbox, "node3", "/etc/gpuprov-test")  # outside --limit
    # No TTY: plain lines a CI log can be read by.
    assert "> PLAY Exercise gpuprov bootstrap" in result.stderr
    # One line per role per host as it finishes (small.yml's tasks are in no role), with the progress.
    assert "node1: (play tasks) done in " in result.stderr and "tasks done" in result.stderr
    assert summary["roles"]["node1"]["(play tasks)"]["tasks"] >= 4
    assert summary["progress"]["tasks_done"] >= 8
    assert summary["progress"]["slowest_host"] in ("node1", "node2")
    assert f"Run directory (full log, events, summary.json): {latest_run(result.state_dir)}" in result.stderr
    run = latest_run(result.state_dir)
    assert "TASK [Write the second marker]" in (run / "stdout").read_text()  # Ansible's full log
    assert any((run / "job_events").iterdir())
    assert "node1: " in (run / "gpuprov.log").read_text()
    for path in [run, *run.rglob("*")]:  # Ansible's log and events too: the user's alone, whatever the umask
        assert path.stat().st_mode & 0o777 == (0o700 if path.is_dir() else 0o600), path
        assert path.is_dir() or secret.encode() not in path.read_bytes(), path
    assert "db_password" in (run / "gpuprov.log").read_text() and secret not in result.stdout + result.stderr
    command_file = json.loads((run / "command").read_text())
    assert all(key.startswith(("ANSIBLE_", "PATH")) for key in command_file["env"])  # no stray secrets
    assert command_file["env"]["ANSIBLE_HOST_KEY_CHECKING"] == "True"


def test_failed_host(deb_sandbox: Sandbox) -> None:
    result = bootstrap(deb_sandbox, *LIMIT, "-e", "test_fail_host=node2", playbook=SMALL_PLAYBOOK)
    assert result.returncode == 5, result.stderr
    flat = " ".join(result.stderr.split())
    assert "error: node2: FAILED: Fail on the host a test names: failing on purpose on node2" in flat
    assert "Failed tasks" in flat
    assert result.error_lines()[-1].startswith("error: bootstrap failed on 1 of 2 host(s): node2; run log:")
    hosts = result.summary()["hosts"]
    assert hosts["node1"]["status"] == "ok"
    assert hosts["node2"]["failed_tasks"] == [
        {
            "task": "Fail on the host a test names",
            "message": "failing on purpose on node2",
            "unreachable": False,
        }
    ]


def test_interrupt_then_run_again(deb_sandbox: Sandbox) -> None:
    for node in ("node1", "node2"):
        deb_sandbox_exec_rm(deb_sandbox, node)
    result = bootstrap_interrupted(
        deb_sandbox,
        *LIMIT,
        "-e",
        "test_sleep=120",
        when=": Write the first marker",
        times=2,  # node1 and node2 are both past it,
        settle_s=3.0,  # and into the next task, the 120 s wait (its start is not in the run log)
        playbook=SMALL_PLAYBOOK,
    )
    assert result.returncode == 130, result.stderr
    (line,) = result.error_lines()
    assert line.startswith("error: interrupted: Ansible was stopped while ")
    assert "Wait (so a test can interrupt the run here)" in line and "run the same command again" in line
    assert result.summary()["status"] == "interrupted"
    assert not ansible_processes(deb_sandbox)  # no ansible-playbook (nor a worker of it) left behind
    assert not exists_on(deb_sandbox, "node1", "/etc/gpuprov-test/second")  # stopped before that task

    again = bootstrap(deb_sandbox, *LIMIT, playbook=SMALL_PLAYBOOK)
    assert again.returncode == 0, again.stderr
    for node in ("node1", "node2"):
        assert again.summary()["hosts"][node]["status"] in ("ok", "changed")
        assert exists_on(deb_sandbox, node, "/etc/gpuprov-test/second")


def deb_sandbox_exec_rm(sandbox: Sandbox, node: str) -> None:
    subprocess.run(
        ["docker", "exec", f"gpuprov-{sandbox.name}-{node}", "rm", "-rf", "/etc/gpuprov-test"], check=True
    )


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a pseudo-terminal")
def test_live_progress_on_a_terminal(deb_sandbox: Sandbox) -> None:
    # --full: the run before this one left these hosts as recorded, and the live table is Ansible's
    argv = " ".join(command(deb_sandbox, *LIMIT, "--full", playbook=SMALL_PLAYBOOK))
    proc = subprocess.run(
        ["script", "-qec", argv, "/dev/null"],
        capture_output=True,
        text=True,
        env={**deb_sandbox.env, "COLUMNS": "150", "TERM": "xterm"},
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout
    assert "gpuprov bootstrap: small.yml" in proc.stdout  # the live table's title
    assert "current task" in proc.stdout
    assert "node1: changed:" not in proc.stdout  # no plain lines on a terminal
    # The live line under the table: the overall progress, and the time left (or why there is no estimate).
    assert "tasks done" in proc.stdout
    assert "left (from run " in proc.stdout or "no comparable run: no estimate yet" in proc.stdout
    assert "(play tasks) done in" not in proc.stdout  # the per-role lines are for logs
