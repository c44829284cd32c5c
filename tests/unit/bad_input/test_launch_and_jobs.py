"""What `gpuprov launch`, `jobs`, `logs` and `stop` refuse, and why.

Each refusal is one `error:` line on stderr (what is wrong, where, what to do) and a documented exit code
(docs/exit-codes.md), never a traceback, and nothing is started, pushed or recorded. Secrets stay where
they are: a job's files are private to the user, here and on the hosts, and nothing outside --workdir is
pushed. What needs real hosts (file modes there, a command run there) is in
tests/integration/launch/test_bad_input.py. The commands run through main() in this process
(tests/unit/in_process.py); a few start the real `gpuprov` command, to prove the same end to end.

The hosts here are 127.0.0.1 on closed ports (1, 2): every SSH connection is refused at once.
"""

from __future__ import annotations

import json
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts
from gpuprov.errors import BadInput
from gpuprov.launch import jobs, options, plan, push, remote, render, stream
from gpuprov.launch.launchers.torchrun import Torchrun
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error, real_gpuprov

TORCHRUN = Torchrun()

JOB = "20250101-120000-abcd"


def gpuprov(*args: str, cwd: Path) -> in_process.Result:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GPUPROV_STATE_DIR": str(cwd / "state")}
    return in_process.gpuprov(*args, cwd=cwd, env=env)


def host_record(name: str = "node1", port: int = 1, **changes: Any) -> dict[str, Any]:
    record = {
        "name": name, "address": "127.0.0.1", "port": port, "user": "gpuprov", "key_file": None,
        "known_hosts": "/nonexistent/known_hosts", "python": "/usr/bin/python3", "node_rank": 0, "nproc": 1,
    }  # fmt: skip
    return {**record, **changes}


def write_record(work: Path, job_id: str = JOB, **changes: Any) -> Path:
    """A job record as `gpuprov launch` writes it (detached, running on node1), with `changes`."""
    record = {
        "id": job_id, "script": "train.py", "args": [], "hosts": [host_record()], "master": "192.0.2.1:29500",
        "detach": True, "grace_s": 5.0, "created": 1735732800.0, "state": "running", "exit_codes": {},
        "finished": None,
    }  # fmt: skip
    record.update(changes)
    path = work / "state" / "jobs" / job_id / "job.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ----- 1. --workdir pushes regular files inside it, never what a symlink points to outside ---------------


def test_workdir_symlinks_are_not_followed_out_of_it(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("PRIVATE KEY\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "id_ed25519").write_text("PRIVATE KEY\n")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "train.py").write_text("print('hi')\n")
    (work / "shadow").symlink_to("/etc/shadow")  # absolute
    (work / "sub" / "up").symlink_to("../../secret")  # relative, climbing out
    (work / "hop").symlink_to("sub/up")  # a chain of links that ends outside
    (work / "ssh").symlink_to(tmp_path / "outside")  # a directory outside
    (work / "dangling").symlink_to(tmp_path / "nothing")
    (work / "alias.py").symlink_to("train.py")  # inside: pushed as a copy of train.py

    payload = push.collect(work / "train.py", work, include_large=False, max_file_mb=10)

    assert [f.rel for f in payload.files] == ["alias.py", "train.py"]
    assert {f.path for f in payload.files} == {work / "train.py"}  # read from the real file
    assert payload.skipped_links == ["dangling", "hop", "shadow", "ssh", "sub/up"]


# ----- 2. what carries the job's environment is private to the user ---------------------------------------


def test_local_job_records_and_logs_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    old = jobs.jobs_root() / JOB  # left by an older gpuprov, readable by everyone
    old.mkdir(parents=True)
    old.parent.chmod(0o755)
    old.chmod(0o755)
    (old / "node1.log").write_text("old line\n")
    (old / "node1.log").chmod(0o644)
    for job_id in (JOB, jobs.new_id()):
        job = jobs.Job(id=job_id, script="t", args=[], hosts=[], master="m", detach=False, grace_s=5.0)
        job.save()
        job.mark(jobs.RUNNING)
        printer = stream.Printer(["node1"], {"node1": job.log_path("node1")})
        printer.line("node1", "[rank0]:HF_TOKEN=hf_secret")
        printer.close()
        assert mode(job.local_dir) == 0o700, job_id
        assert mode(job.local_dir / "job.json") == 0o600
        assert mode(job.local_dir / "node1.log") == 0o600
        assert mode(job.local_dir / ".lock") == 0o600
    assert mode(jobs.jobs_root()) == 0o700


def test_sbatch_script_with_the_environment_is_private(work: Path) -> None:
    proc = real_gpuprov(
        "launch", "--nodes", "2", "--env", "HF_TOKEN=hf_secret", "--emit-sbatch", "job.sbatch", "train.py",
        cwd=work,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "export HF_TOKEN=hf_secret" in (work / "job.sbatch").read_text()
    assert mode(work / "job.sbatch") == 0o700


# ----- 5. job records and host names are checked before they reach a shell or a path ----------------------


@pytest.mark.parametrize(
    "record_id",
    ["x$(touch F)", "../../../tmp/x", "20250101-120000-abce", "", 5],
    ids=["command", "path", "another-job", "empty", "number"],
)
def test_a_record_whose_id_is_not_its_directory_is_refused(work: Path, record_id: object) -> None:
    write_record(work, id=record_id)
    for command in ("logs", "stop"):
        line = one_error(gpuprov(command, JOB, cwd=work), 2)
        assert f"the record of job {JOB} ({work}/state/jobs/{JOB}/job.json) is damaged" in line
        assert "field 'id'" in line
    assert not (work / "F").exists()
    assert json.loads((work / "state" / "jobs" / JOB / "job.json").read_text())["state"] == "running"


@pytest.mark.parametrize(
    "name", ["../../victim", "a/b", ".hidden", "", "node\n1", "x$(touch F)", "-rf"]
)  # fmt: skip
def test_a_record_whose_host_name_is_no_name_is_refused(work: Path, name: str) -> None:
    (work / "state" / "victim.log").parent.mkdir(parents=True)
    (work / "state" / "victim.log").write_text("[rank0]:not this job's log\n")
    write_record(work, hosts=[host_record(name)], state="succeeded", detach=False)
    proc = gpuprov("logs", JOB, cwd=work)
    line = one_error(proc, 2)
    assert "is damaged: hosts[0]: field 'name' is not a host name" in line
    assert "not this job's log" not in proc.stdout
    assert (work / "state" / "victim.log").exists()


def test_an_inventory_host_name_that_cannot_name_a_log_file_is_refused(work: Path) -> None:
    (work / "inventory.ini").write_text(
        "[gpu_nodes]\n"
        "../../evil ansible_host=127.0.0.1 ansible_port=1 gpuprov_master_addr=192.0.2.1\n"
        "node2 ansible_host=127.0.0.1 ansible_port=2\n"
    )
    proc = real_gpuprov("launch", "train.py", cwd=work)
    line = one_error(proc, 2)
    assert "host name '../../evil'" in line and "inventory.ini" in line
    assert "Preflight" not in proc.stderr  # refused before any host is contacted


def test_commands_sent_to_hosts_quote_every_value(tmp_path: Path) -> None:
    marker = tmp_path / "F"
    hostile = f"x$(touch {marker})`touch {marker}`"
    commands = [
        remote.agent_command("true", hostile, "stop", hostile, "5"),
        remote.log_command(hostile),
        push.receive_command(hostile),
        push.receive_command_choosing(f"py={shlex.quote(hostile)}"),
    ]
    for command in commands:
        subprocess.run(["sh", "-c", command], env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert not marker.exists()


# ----- 6. templates are rendered in Jinja2's sandbox ------------------------------------------------------


def _command() -> render.HostCommand:
    return render.HostCommand(
        job_id=JOB, host="node1", node_rank=0, nnodes=1, nproc=1, python="/usr/bin/python3",
        job_dir=f".gpuprov/jobs/{JOB}", script="train.py", script_args=(), master_addr="10.0.0.1",
        master_port=29500, rdzv="static", max_restarts=0, env={"A": "1"},
    )  # fmt: skip


@pytest.mark.parametrize(
    "expression",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ lipsum.__globals__['os'].getcwd() }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ env.update({'LD_PRELOAD': '/tmp/x.so'}) }}",
        "{{ '{0.__class__}'.format(script) }}",
    ],
    ids=["mro", "globals", "init-globals", "mutate", "format"],
)
def test_templates_cannot_reach_python(tmp_path: Path, expression: str) -> None:
    template = tmp_path / "torchrun.sh.j2"
    template.write_text(f"#!/usr/bin/env bash\n{expression}\n")
    with pytest.raises(BadInput, match=rf"template {template} line 2: .*unsafe") as info:
        TORCHRUN.host_script(_command(), template)
    assert "\n" not in info.value.message


# ----- 7. every problem preflight finds is printed --------------------------------------------------------


@pytest.mark.parametrize("verbosity", [[], ["-q"], ["-v"]], ids=["normal", "quiet", "verbose"])
def test_every_preflight_problem_is_listed(work: Path, verbosity: list[str]) -> None:
    proc = gpuprov(*verbosity, "launch", "train.py", cwd=work)
    line = one_error(proc, 6)  # the hosts cannot be reached: exit 6, as bootstrap's preflight
    assert "preflight found 2 problems" in line
    listed = proc.stderr.replace(line, "")
    assert "node1 (127.0.0.1:1): cannot connect over SSH" in listed
    assert "node2 (127.0.0.1:2): cannot connect over SSH" in listed


# ----- 8. a script and a workdir file of the same name ---------------------------------------------------


def test_a_script_outside_the_workdir_named_like_a_workdir_file_is_refused(work: Path) -> None:
    (work / "code").mkdir()
    (work / "code" / "train.py").write_text("print('the other one')\n")
    line = one_error(gpuprov("launch", "--workdir", "code", str(work / "train.py"), cwd=work), 2)
    assert f"script {work}/train.py" in line and f"{work}/code/train.py" in line
    assert not (work / "state").exists()


def test_a_relative_script_name_that_names_two_files_is_refused(work: Path) -> None:
    (work / "code").mkdir()
    (work / "code" / "train.py").write_text("print('the other one')\n")
    line = one_error(gpuprov("launch", "--workdir", "code", "train.py", cwd=work), 2)
    assert f"{work}/code/train.py" in line and f"{work}/train.py" in line


def test_the_same_file_through_workdir_and_cwd_is_no_clash(work: Path) -> None:
    opts = options.build(script="train.py", workdir=str(work))
    assert opts.script == work / "train.py"
    (work / "code").mkdir()
    (work / "code" / "other.py").write_text("")
    assert options.build(script=str(work / "train.py"), workdir=str(work / "code")).script == (
        work / "train.py"
    )


# ----- 9. --grace is a finite number of seconds in a sane range ------------------------------------------


@pytest.mark.parametrize("grace", ["inf", "1e300", "nan", "-inf", "3601", "0", "-1"])
def test_grace_out_of_range_is_refused(work: Path, grace: str) -> None:
    line = one_error(
        gpuprov("launch", "--grace", grace, "--emit-sbatch", "x.sbatch", "train.py", cwd=work), 2
    )
    assert f"--grace {grace} is not valid" in line
    assert not (work / "x.sbatch").exists()


@pytest.mark.parametrize("grace", ["0.5", "3600"])
def test_grace_in_range_is_kept(work: Path, grace: str) -> None:
    assert options.build(script=str(work / "train.py"), grace_s=float(grace)).grace_s == float(grace)


@pytest.mark.parametrize("grace", ["NaN", "Infinity", "1e300", "-1", '"5"'])
def test_a_record_with_an_impossible_grace_period_is_refused(work: Path, grace: str) -> None:
    path = write_record(work)
    path.write_text(path.read_text().replace('"grace_s": 5.0', f'"grace_s": {grace}'))
    line = one_error(gpuprov("stop", JOB, cwd=work), 2)
    assert "is damaged: field 'grace_s'" in line
    assert json.loads(path.read_text(), parse_constant=float)["state"] == "running"  # not left "stopping"


def test_job_records_are_always_valid_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path))
    job = jobs.Job(id=JOB, script="t", args=[], hosts=[], master="m", detach=False, grace_s=float("nan"))
    with pytest.raises(ValueError):
        job.save()
    assert not (jobs.jobs_root() / JOB / "job.json").exists()


# ----- 16. input that is not text, templates that reach outside their directory --------------------------


@pytest.mark.parametrize(
    ("content", "line_number"),
    [
        (b"A=1\nB=caf\xe9\n", 2),  # Latin-1
        (b"\xff\xfeA\x00=\x001\x00\n\x00", 1),  # UTF-16
        (b"A=1\nB=x\x00y\n", 2),  # a NUL byte: no environment variable can hold it
    ],
    ids=["latin-1", "utf-16", "nul"],
)
def test_env_file_that_is_not_text(work: Path, content: bytes, line_number: int) -> None:
    (work / "job.env").write_bytes(content)
    line = one_error(gpuprov("launch", "--env-file", "job.env", "train.py", cwd=work), 2)
    assert f"--env-file job.env line {line_number}" in line
    assert not (work / "state").exists()


@pytest.mark.parametrize(
    "statement",
    [
        '{% include "/etc/passwd" %}',
        '{% include "../outside.j2" %}',
        '{% extends "/nonexistent/base.j2" %}',
        '{% import "/nonexistent/macros.j2" as m %}',
        '{% include "missing.j2" %}',
    ],
    ids=["absolute", "parent", "extends", "import", "missing"],
)
def test_template_that_includes_what_is_not_beside_it(tmp_path: Path, statement: str) -> None:
    (tmp_path / "outside.j2").write_text("outside\n")
    (tmp_path / "t").mkdir()
    template = tmp_path / "t" / "torchrun.sh.j2"
    template.write_text(f"#!/usr/bin/env bash\n{statement}\n")
    with pytest.raises(BadInput, match=rf"template {template}: .* not found in {tmp_path}/t") as info:
        TORCHRUN.host_script(_command(), template)
    assert "\n" not in info.value.message


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("{{ 1 // 0 }}", "ZeroDivisionError"),
        ('{{ "%d" % "x" }}', "TypeError: %d format"),
        ("{{ nope }}", "nope"),
    ],
)
def test_template_that_fails_while_rendering(tmp_path: Path, expression: str, error: str) -> None:
    template = tmp_path / "torchrun.sh.j2"
    template.write_text(f"#!/usr/bin/env bash\n\n{expression}\n")
    with pytest.raises(BadInput, match=rf"template {template} line 3: .*{error}"):
        TORCHRUN.host_script(_command(), template)


def test_template_that_is_not_text(work: Path) -> None:
    (work / "t.j2").write_bytes(b"#!/bin/bash\necho caf\xe9\n")
    line = one_error(gpuprov("launch", "--template", "t.j2", "train.py", cwd=work), 2)
    assert "--template t.j2 line 2 is not UTF-8 text" in line


# ----- 17. messages that say what is really wrong ---------------------------------------------------------


def test_a_directory_given_as_a_file(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (work / "code.py").mkdir()
    line = one_error(gpuprov("launch", "code.py", cwd=work), 2)
    assert "script code.py is a directory" in line
    line = one_error(gpuprov("launch", "--template", "code.py", "train.py", cwd=work), 2)
    assert "--template code.py is a directory" in line
    host = hosts.Host(
        "node1", "10.0.0.1", 22, "u", None, Path("/k"), vars={"gpuprov_torchrun_template": "code.py"}
    )
    monkeypatch.chdir(work)
    with pytest.raises(BadInput, match=r"node1: gpuprov_torchrun_template code\.py is a directory"):
        plan.template_for(options.LaunchOptions(script=work / "train.py"), host)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ({"hosts": None}, "field 'hosts' is missing"),
        ({"state": None}, "field 'state' is missing"),
        ({"hosts": "node1"}, "field 'hosts' is not a list of hosts"),
        ({"hosts": []}, "field 'hosts' is not a list of hosts"),
        ({"hosts": [host_record(port="22")]}, "hosts[0]: field 'port' is not a TCP port"),
        ({"hosts": [{"name": "node1"}]}, "hosts[0]: field 'address' is missing"),
        ({"state": "exploded"}, "field 'state' is not one of"),
        ({"exit_codes": {"node1": "x"}}, "field 'exit_codes'"),
        ({"extra": 1}, "unknown field 'extra'"),
    ],
)
def test_a_damaged_record_says_what_is_wrong(work: Path, damage: dict[str, Any], reason: str) -> None:
    path = write_record(work)
    record = json.loads(path.read_text())
    for key, value in damage.items():
        if value is None:
            del record[key]
        else:
            record[key] = value
    path.write_text(json.dumps(record))
    line = one_error(gpuprov("logs", JOB, cwd=work), 2)
    assert f"the record of job {JOB} ({path}) is damaged: {reason}" in line
    assert f"remove {path.parent}" in line


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"{", "not JSON"), (b"[]", "not a JSON object"), (b"\xff", "not JSON")],
    ids=["truncated", "list", "binary"],
)
def test_a_record_that_is_not_a_record(work: Path, content: bytes, reason: str) -> None:
    write_record(work).write_bytes(content)
    assert reason in one_error(gpuprov("stop", JOB, cwd=work), 2)


# ----- 18. `gpuprov jobs` lists damaged records instead of hiding them ------------------------------------


def test_jobs_lists_damaged_records(work: Path) -> None:
    write_record(work, "20250101-110000-aaaa", state="succeeded", exit_codes={"node1": 0}, finished=1.0)
    damaged = write_record(work, "20250101-120000-bbbb")
    damaged.write_text("{")
    missing = work / "state" / "jobs" / "20250101-130000-cccc"
    missing.mkdir()
    proc = gpuprov("jobs", cwd=work)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert "succeeded" in rows["20250101-110000-aaaa"]
    assert "damaged" in rows["20250101-120000-bbbb"] and "damaged" in rows["20250101-130000-cccc"]
    assert f"warning: the record of job 20250101-120000-bbbb ({damaged}) is damaged" in proc.stderr
    assert f"({missing}/job.json) is damaged: it does not exist" in proc.stderr
    assert "No jobs recorded" not in proc.stderr


def test_jobs_with_only_damaged_records_is_not_empty(work: Path) -> None:
    write_record(work).write_text("not json")
    proc = gpuprov("jobs", cwd=work)
    assert "No jobs recorded" not in proc.stderr
    assert JOB in proc.stdout and "damaged" in proc.stdout


# ----- 19. `gpuprov logs` of a host it cannot reach fails, naming the host --------------------------------


@pytest.mark.parametrize("follow", [[], ["-f"]], ids=["logs", "logs-f"])
def test_logs_of_an_unreachable_host(work: Path, follow: list[str]) -> None:
    write_record(work, hosts=[host_record("node1", 1), host_record("node2", 2, node_rank=1)])
    line = one_error(real_gpuprov("logs", JOB, *follow, cwd=work), 6)
    assert "node1 (127.0.0.1:1)" in line and "node2 (127.0.0.1:2)" in line
    assert f"cannot read the log of job {JOB}" in line


# ----- 21. --emit-sbatch writes into an existing directory only ------------------------------------------


@pytest.mark.parametrize("target", ["nonexistent/dir/x.sbatch", "train.py/x.sbatch"], ids=["missing", "file"])
def test_emit_sbatch_into_a_directory_that_does_not_exist(work: Path, target: str) -> None:
    line = one_error(gpuprov("launch", "--nodes", "2", "--emit-sbatch", target, "train.py", cwd=work), 2)
    assert f"--emit-sbatch {target}: directory {Path(target).parent} does not exist" in line
    assert not (work / "nonexistent").exists()


# ----- 22. a missing SSH key file is bad input, named --------------------------------------------------


def test_missing_ssh_key_in_the_inventory(work: Path) -> None:
    with (work / "inventory.ini").open("a") as f:
        f.write("[gpu_nodes:vars]\nansible_ssh_private_key_file=~/.ssh/nonexistent_key\n")
    line = one_error(gpuprov("launch", "train.py", cwd=work), 2)
    assert f"SSH key {work}/.ssh/nonexistent_key" in line


def test_known_hosts_that_is_a_directory_in_the_inventory(work: Path) -> None:
    with (work / "inventory.ini").open("a") as f:
        f.write(f"[gpu_nodes:vars]\ngpuprov_known_hosts_file={work}\n")
    line = one_error(gpuprov("launch", "train.py", cwd=work), 2)
    assert f"known_hosts file {work} is a directory" in line


def test_jobs_lists_a_job_whose_key_file_is_missing(work: Path) -> None:
    write_record(work, hosts=[host_record(key_file=str(work / "gone_key"))])
    proc = gpuprov("jobs", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert JOB in proc.stdout and "running" in proc.stdout
    assert f"warning: job {JOB}: node1: SSH key {work}/gone_key" in proc.stderr


@pytest.mark.parametrize("command", ["logs", "stop"])
def test_missing_ssh_key_in_a_job_record(work: Path, command: str) -> None:
    path = write_record(work, hosts=[host_record(key_file=str(work / "gone_key"))])
    line = one_error(gpuprov(command, JOB, cwd=work), 2)
    assert f"SSH key {work}/gone_key" in line and "does not exist" in line
    assert json.loads(path.read_text())["state"] == "running"


# ----- --launcher ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["launch", "bench"])
def test_an_unknown_launcher(work: Path, verb: str) -> None:
    args = (
        ("launch", "--launcher", "horovodrun", "train.py")
        if verb == "launch"
        else ("bench", "--launcher", "x")
    )
    line = one_error(gpuprov(*args, cwd=work), 2)
    assert "--launcher" in line and "'torchrun'" in line and "'mpirun'" in line


@pytest.mark.parametrize("option", [("--max-restarts", "2"), ("--rdzv", "c10d")])
def test_torchruns_own_options_with_mpirun(work: Path, option: tuple[str, str]) -> None:
    line = one_error(gpuprov("launch", "--launcher", "mpirun", *option, "train.py", cwd=work), 2)
    assert line.startswith(f"error: {' '.join(option)} is torchrun's; mpirun neither restarts ranks")


def test_mpirun_with_an_image_is_refused(work: Path) -> None:
    image = "registry:5000/team/pytorch:1@sha256:" + "a" * 64
    line = one_error(gpuprov("launch", "--launcher", "mpirun", "--image", image, "train.py", cwd=work), 2)
    assert line.startswith("error: --launcher mpirun with --image is not supported")
