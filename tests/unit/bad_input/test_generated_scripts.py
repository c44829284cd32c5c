"""Values that reach a generated script are words of it, never commands (issue 28, item 2).

The `--emit-sbatch` file, the `--scheduler slurm` job script and each host's torchrun script are rendered
from the user's values: script arguments, the script's file name, `--env` and `--env-file` values,
`--workdir`, the `--emit-sbatch` file name, inventory values. Each of them may hold a newline or shell
syntax. Checked with parsers and by running the scripts, not by eye: `bash -n`; the `#SBATCH` directives
as sbatch reads them (it stops at the first line that is not a comment); and the script run by bash with
stand-ins for srun, scontrol and python on PATH, which must get each value back whole and run nothing else.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuprov import resources
from gpuprov.launch import options, render, slurm
from gpuprov.launch.launchers.torchrun import Torchrun
from tests.unit.bad_input.commands import one_error, real_gpuprov

TORCHRUN = Torchrun()
PWNED = "PWNED"  # the file a payload would create in the directory the script runs in

PAYLOADS = [
    f"x\ntouch {PWNED}",
    f"x\n#SBATCH --nodes=99\ntouch {PWNED}",
    f"x\r\ntouch {PWNED}",
    f"$(touch {PWNED})",
    f"`touch {PWNED}`",
    f"x'; touch {PWNED}; echo '",
    f'x"; touch {PWNED}; echo "',
    f"x\\\ntouch {PWNED}",
    f"x\x1b]0;\x07\x0btouch {PWNED}",
]
PAYLOAD_IDS = ["newline", "sbatch-line", "crlf", "subst", "backtick", "quote", "dquote", "backslash", "ctrl"]

EXPECTED_DIRECTIVES = {"--job-name", "--nodes", "--ntasks-per-node", "--exclusive", "--mem", "--output"}

STANDINS = {
    # scontrol: two nodes, each with a NodeAddr
    "scontrol": '[ "$2" = hostnames ] && printf "n1\\nn2\\n" || echo "NodeName=$3 NodeAddr=10.0.0.1"\n',
    # srun and python: record the arguments they were given (NUL-separated) and the job's variable
    "srun": 'printf "%s\\0" "$@" > "$RECORD/args"; printf "%s" "${VALUE-}" > "$RECORD/value"\n',
    "python3": 'printf "%s\\0" "$@" > "$RECORD/args"; printf "%s" "${VALUE-}" > "$RECORD/value"\n',
}


def sbatch_directives(text: str) -> list[str]:
    """The `#SBATCH` options as sbatch reads them: from the lines before the first that is not a comment."""
    found = []
    for line in text.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH"):
            found.append(line.removeprefix("#SBATCH").strip())
    return found


def run_script(text: str, where: Path, **env: str) -> tuple[list[str], str]:
    """Run a generated script with bash and the stand-ins; the arguments srun/python got, and $VALUE."""
    assert subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True).returncode == 0, text
    bin_dir, record = where / "bin", where / "record"
    bin_dir.mkdir(exist_ok=True)
    record.mkdir(exist_ok=True)
    for name, body in STANDINS.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}")
        (bin_dir / name).chmod(0o755)
    script = where / "job.sh"
    script.write_text(text)
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(record), "HOME": str(where)}
    slurm_env = {"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NNODES": "2", "SLURM_JOB_ID": "7"}
    proc = subprocess.run(
        ["bash", str(script)], cwd=where, env={**base, **slurm_env, **env}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    pwned = [p for p in where.rglob(PWNED)]
    assert not pwned, f"a value ran as a command: {pwned}\n{text}"
    args = (record / "args").read_bytes().decode().split("\0")[:-1]
    return args, (record / "value").read_bytes().decode()


# ----- the --emit-sbatch file -----------------------------------------------------------------------------


def _emit(work: Path, *args: str, target: str = "job.sbatch") -> str:
    proc = real_gpuprov("launch", "--nodes", "2", "--emit-sbatch", target, *args, cwd=work)
    assert proc.returncode == 0, proc.stderr
    return (work / target).read_text()


def _check_sbatch(text: str, where: Path) -> tuple[list[str], str]:
    names = {directive.partition("=")[0] for directive in sbatch_directives(text)}
    assert names == EXPECTED_DIRECTIVES, text
    assert "--nodes=2" in sbatch_directives(text)
    where.mkdir()
    return run_script(text, where)


@pytest.mark.parametrize("payload", PAYLOADS, ids=PAYLOAD_IDS)
def test_script_arguments_and_env_values_stay_words(work: Path, payload: str) -> None:
    text = _emit(work, "--env", f"VALUE={payload}", "train.py", "--", payload, "--lr", payload)
    args, value = _check_sbatch(text, work / "run")
    assert args[-4:] == ["train.py", payload, "--lr", payload]
    assert value == payload


@pytest.mark.parametrize("payload", PAYLOADS, ids=PAYLOAD_IDS)
def test_file_and_directory_names_stay_words(work: Path, payload: str) -> None:
    """The script's file name (the job name comes from it), --workdir and the --emit-sbatch file name."""
    code = work / f"code{payload}"
    code.mkdir()
    script = code / f"train{payload}.py"
    script.write_text("print('hi')\n")
    text = _emit(work, "--workdir", str(code), str(script), target=f"job{payload}.sbatch")
    args, _ = _check_sbatch(text, work / "run")
    name = sbatch_directives(text)[0].removeprefix("--job-name=")
    assert re.fullmatch(r"gpuprov-train[A-Za-z0-9._+-]*", name), name  # also the --output file's name
    assert args[-1] == script.name
    assert f"--chdir={code}" in args


@pytest.mark.parametrize("payload", PAYLOADS, ids=PAYLOAD_IDS)
def test_the_slurm_scheduler_script(work: Path, payload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(work)
    opts = options.build(
        script="train.py", script_args=(payload,), env=(f"VALUE={payload}",), nodes=2, scheduler="slurm"
    )
    text = slurm.sbatch_text(opts, 2, ["--scheduler", "slurm", "train.py", payload], f"sub{payload}/t.py")
    (work / "run" / "work").mkdir(parents=True)
    args, value = run_script(text, work / "run", SLURM_SUBMIT_DIR=str(work / "run"))
    assert sbatch_directives(text)[1] == "--nodes=2"
    assert args[-2:] == [f"sub{payload}/t.py", payload]
    assert value == payload


# ----- each host's torchrun script ------------------------------------------------------------------------

FIELDS = ["job_id", "host", "python", "job_dir", "script", "script_args", "master_addr", "env", "template"]


def _host_command(python: str) -> render.HostCommand:
    return render.HostCommand(
        job_id="20250101-120000-abcd", host="node1", node_rank=0, nnodes=2, nproc=1, python=python,
        job_dir=".gpuprov/jobs/20250101-120000-abcd", script="train.py", script_args=("--lr", "1"),
        master_addr="10.0.0.1", master_port=29500, rdzv="static", max_restarts=0, env={"VALUE": "v"},
    )  # fmt: skip


@pytest.mark.parametrize("rdzv", ["static", "c10d"])
@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("payload", PAYLOADS, ids=PAYLOAD_IDS)
def test_host_script_values_stay_words(tmp_path: Path, payload: str, field: str, rdzv: str) -> None:
    python = tmp_path / "bin" / "python3"
    command = dataclasses.replace(_host_command(str(python)), rdzv=rdzv)
    template = None
    if field == "template":  # a user's template: its path is named in a comment
        template = tmp_path / f"t{payload}" / "torchrun.sh.j2"
        template.parent.mkdir()
        shutil.copy(resources.data_dir("templates") / "torchrun.sh.j2", template)
    elif field == "script_args":
        command = dataclasses.replace(command, script_args=(payload, "--lr", payload))
    elif field == "env":
        command = dataclasses.replace(command, env={"VALUE": payload})
    elif field != "python":
        command = dataclasses.replace(command, **{field: f"{getattr(command, field)}{payload}"})
    text = TORCHRUN.host_script(command, template)
    if field == "python":  # a python named so cannot be run: parse only, and the line count is unchanged
        text = TORCHRUN.host_script(dataclasses.replace(command, python=f"{python}{payload}"), None)
        assert len(text.splitlines()) == len(TORCHRUN.host_script(command, None).splitlines())
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
        return
    (tmp_path / command.job_dir / "work").mkdir(parents=True)
    args, value = run_script(text, tmp_path)
    assert args[-len(command.script_args) - 1 :] == [command.script, *command.script_args]
    assert value == command.env["VALUE"]
    assert os.path.basename(args[0]) == "run_torchrun.py"


# ----- the master's address reaches the hosts' scripts and the port test's protocol -----------------------


@pytest.mark.parametrize(
    "address", ["192.0.2.1 listen 1 1 1 1", "192.0.2.1;touch PWNED", "$(touch PWNED)", "a'b"]
)
def test_a_master_address_that_is_no_address_is_refused(work: Path, address: str) -> None:
    """gpuprov_master_addr goes into every host's script and into the line the port test sends the master's
    probe (`connect ADDRESS PORT ...`): a name or an address only, checked before any host is contacted."""
    inventory = work / "inventory.ini"
    quoted = address.replace('"', '\\"')
    inventory.write_text(
        inventory.read_text().replace("gpuprov_master_addr=192.0.2.1", f'gpuprov_master_addr="{quoted}"')
    )
    proc = real_gpuprov("launch", "--nodes", "2", "train.py", cwd=work)
    line = one_error(proc, 2)
    assert "master node1 has address" in line and "gpuprov_master_addr" in line
    assert "Preflight" not in proc.stderr
