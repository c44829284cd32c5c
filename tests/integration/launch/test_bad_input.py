"""Secrets stay where they are, and a damaged job record reaches no shell: on the real 2-node sandbox.

The local side (records, options, templates, messages) is in tests/unit/bad_input/test_launch_and_jobs.py.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from gpuprov import hosts
from tests.integration.conftest import Sandbox
from tests.integration.launch.conftest import container, docker_exec, gp, launch_env

pytestmark = pytest.mark.integration

HOME = "/home/gpuprov"
LISTER = "import os\nprint('files:', ' '.join(sorted(os.listdir('.'))), flush=True)\n"


def _job_id(output: str) -> str:
    for word in output.replace("(", " ").split():
        if word.count("-") == 2 and word[:8].isdigit() and len(word) == 20:
            return word
    raise AssertionError(f"no job id in:\n{output}")


def _modes(node: str, *paths: str) -> dict[str, str]:
    proc = docker_exec(node, "stat", "-c", "%a %n", *paths)
    assert proc.returncode == 0, proc.stderr
    return {name: mode for mode, name in (line.split(" ", 1) for line in proc.stdout.splitlines())}


def test_job_files_are_private_and_workdir_links_are_not_followed(
    launch_sandbox: Sandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "id_ed25519"
    secret.write_text(f"PRIVATE KEY {uuid.uuid4().hex}\n")
    work = tmp_path / "code"
    work.mkdir()
    (work / "train.py").write_text(LISTER)
    (work / "key").symlink_to(secret)
    (work / "shadow").symlink_to("/etc/shadow")

    proc = gp(
        launch_sandbox, "launch", "--nodes", "2", "--env", "HF_TOKEN=hf_secret", "--workdir", str(work),
        "train.py",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "not pushing 2 symlink(s) of --workdir" in proc.stderr and "key, shadow" in proc.stderr
    assert proc.stdout.count("files: train.py\n") == 2, proc.stdout  # each rank saw only the script
    job_id = _job_id(proc.stderr)

    job = f"{HOME}/.gpuprov/jobs/{job_id}"
    for name in ("node1", "node2"):
        node = container(launch_sandbox, name)
        assert "HF_TOKEN=hf_secret" in docker_exec(node, "cat", f"{job}/run.sh").stdout
        stored = f"{HOME}/.gpuprov/files/{hashlib.sha256(LISTER.encode()).hexdigest()}"
        dirs = [f"{HOME}/.gpuprov", f"{HOME}/.gpuprov/files", f"{HOME}/.gpuprov/jobs", job, f"{job}/work"]
        files = [f"{job}/run.sh", f"{job}/job.log", f"{job}/exit_code", f"{job}/work/train.py", stored]
        modes = _modes(node, *dirs, *files)
        assert {path: modes[path] for path in dirs} == dict.fromkeys(dirs, "700"), name
        assert {path: modes[path] for path in files} == dict.fromkeys(files, "600"), name
        leaked = docker_exec(node, "grep", "-rl", "PRIVATE KEY", f"{HOME}/.gpuprov")
        assert leaked.stdout == "", f"{name}: the linked key was pushed: {leaked.stdout}"

    local = Path(launch_env(launch_sandbox)["GPUPROV_STATE_DIR"]) / "jobs" / job_id
    assert oct(local.stat().st_mode & 0o777) == "0o700"
    assert oct((local / "node1.log").stat().st_mode & 0o777) == "0o600"


def test_a_record_whose_id_is_a_command_runs_nothing_on_the_hosts(launch_sandbox: Sandbox) -> None:
    node1 = hosts.load(launch_sandbox.inventory).host("node1")
    marker = f"/tmp/gpuprov-pwned-{uuid.uuid4().hex[:8]}"
    job_id = "20250101-120000-dead"
    record = {
        "id": f"x$(touch {marker})", "script": "train.py", "args": [], "master": f"{node1.address}:29500",
        "detach": True, "grace_s": 5.0, "created": 1735732800.0, "state": "running", "exit_codes": {},
        "finished": None,
        "hosts": [{
            "name": "node1", "address": node1.address, "port": node1.port, "user": node1.user,
            "key_file": str(node1.key_file) if node1.key_file else None,
            "known_hosts": str(node1.known_hosts), "python": "/usr/bin/python3", "node_rank": 0, "nproc": 1,
        }],
    }  # fmt: skip
    path = Path(launch_env(launch_sandbox)["GPUPROV_STATE_DIR"]) / "jobs" / job_id / "job.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    try:
        for command in (["logs", job_id], ["logs", job_id, "-f"], ["stop", job_id]):
            proc = gp(launch_sandbox, *command, timeout=120)
            assert proc.returncode == 2, proc.stderr
            assert f"the record of job {job_id} ({path}) is damaged: field 'id'" in proc.stderr
        touched = docker_exec(container(launch_sandbox, "node1"), "ls", marker)
        assert touched.returncode != 0, f"{marker} was created on node1"
    finally:
        path.unlink()
        path.parent.rmdir()
