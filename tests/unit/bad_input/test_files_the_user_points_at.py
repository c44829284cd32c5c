"""What gpuprov refuses in a file the user points it at (-e @FILE, --env-file), and what it never echoes.

A file named on the command line may be any file (`-e @/etc/shadow`, a .env of secrets): gpuprov reads it
only as what the option takes, refuses anything else in one line that names the file, the line and (where
the name is not itself the file's content) the key, and never prints or logs a value from it. Runs' records
(gpuprov.log, summary.json, Ansible's output) are private to the user: files 0600, directories 0700.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gpuprov.ansible import arguments, engine, runner, runs
from gpuprov.errors import BadInput, ExitCode
from tests.unit import in_process
from tests.unit.ansible import runner_stand_in
from tests.unit.bad_input.commands import one_error

SECRET = "hunter2-s3cret"

# Files that YAML parses but that are not a mapping of Ansible variable names. Every one holds SECRET where
# a careless message would quote it: a key, a value, a line.
NOT_VARIABLES = {
    "shadow": f"root:$6$salt${SECRET}:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n",
    "passwd": f"root:x:0:0:{SECRET}:/root:/bin/bash\n",
    "key with a blank": f"db password: {SECRET}\n",
    "key with a dash": f"db-password: {SECRET}\n",
    "key starting with a digit": f"1password: {SECRET}\n",
    "python keyword": f"class: {SECRET}\n",
    "non-ASCII key": f"pässword: {SECRET}\n",
    "not a string key": f"true: {SECRET}\n",
    "secret as the key": f"ok: 1\n{SECRET}: 2\n",
    "nested key is fine, the top one is not": f"good: {{a: 1}}\nbad key:\n  x: {SECRET}\n",
    "a list": f"- {SECRET}\n- two\n",
    "a string": f"{SECRET}\n",
    "a .env file": f"DB_PASSWORD={SECRET}\n",
}

# Files YAML cannot parse, whose parser message would quote them.
NOT_YAML = {
    "undefined alias": f"a: *{SECRET}\n",
    "tab": f"a:\n\t{SECRET}: 1\n",
    "unclosed quote": f"a: '{SECRET}\n",
    "bad indentation": f"a: 1\n b: {SECRET}\n",
    "an INI file": f"[section]\npassword = {SECRET}\n",
}


def _refused(text: str, tmp_path: Path) -> str:
    path = tmp_path / "vars.yml"
    path.write_text(text)
    with pytest.raises(BadInput) as info:
        arguments.parse_extra_vars([f"@{path}"])
    message = info.value.message
    assert SECRET not in message and "$6$" not in message and "\n" not in message, message
    assert message.startswith(f"-e @{path}"), message
    return message


@pytest.mark.parametrize("text", NOT_VARIABLES.values(), ids=NOT_VARIABLES.keys())
def test_an_extra_vars_file_must_be_a_mapping_of_variable_names(text: str, tmp_path: Path) -> None:
    message = _refused(text, tmp_path)
    assert "variable name" in message or "mapping of variable names" in message, message


@pytest.mark.parametrize("text", NOT_YAML.values(), ids=NOT_YAML.keys())
def test_an_extra_vars_file_not_yaml_is_refused_without_its_content(text: str, tmp_path: Path) -> None:
    assert "not valid YAML" in _refused(text, tmp_path)


def test_the_refusal_names_the_line_not_the_key(tmp_path: Path) -> None:
    message = _refused(f"ok: 1\nfine: 2\n{SECRET}-x: 3\n", tmp_path)
    assert message == (
        f"-e @{tmp_path / 'vars.yml'}: line 3: the key is not a valid variable name (letters, digits and _, "
        "not starting with a digit); a variables file must be a mapping of variable names to values (YAML or "
        "JSON)"
    )


def test_valid_variable_files_still_load(tmp_path: Path) -> None:
    path = tmp_path / "vars.yml"
    path.write_text("gpu_stack: {cuda_version: '12.4.1'}\n_private: 1\nx2: [1, 2]\n<<: {merged: yes}\n")
    assert arguments.parse_extra_vars([f"@{path}"]) == {
        "gpu_stack": {"cuda_version": "12.4.1"},
        "_private": 1,
        "x2": [1, 2],
        "merged": True,
    }


@pytest.mark.parametrize("item", ["class=1", "pässword=1", "a.b=1", "1x=1"])
def test_a_command_line_key_follows_the_same_rule(item: str) -> None:
    with pytest.raises(BadInput) as info:
        arguments.parse_extra_vars([item])
    assert "is not a valid variable name" in info.value.message


@pytest.mark.parametrize("verb", ["bootstrap", "check"])
@pytest.mark.parametrize("name", ["shadow", "secret as the key", "a .env file"])
def test_every_verb_refuses_the_file_before_a_run(verb: str, name: str, tmp_path: Path) -> None:
    (tmp_path / "inventory.ini").write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\n")
    (tmp_path / "vars.yml").write_text(NOT_VARIABLES[name])
    state = tmp_path / "state"
    result = in_process.gpuprov(
        verb, "inventory.ini", "-e", "@vars.yml", cwd=tmp_path, env={"GPUPROV_STATE_DIR": str(state)}
    )
    line = one_error(result, ExitCode.BAD_INPUT)
    assert line.startswith("error: -e @vars.yml") and SECRET not in result.stderr + result.stdout, line
    assert not (state / "runs").exists()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_run_records_are_private_to_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    old_umask = os.umask(0o022)  # a common umask: files 0644 unless gpuprov says otherwise
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  tasks: []\n")
    (tmp_path / "vars.yml").write_text(f"db_password: {SECRET}\n")
    runner_stand_in.install(monkeypatch, [("playbook_on_stats", {"ok": {"node1": 1}})])
    options = arguments.Options(inventory=inventory, extra_vars=(f"@{tmp_path / 'vars.yml'}",))
    try:
        summary = engine.run_playbook("bootstrap", playbook, options)
    finally:
        os.umask(old_umask)
    run_dir = Path(summary["run_dir"])
    assert _mode(runs.runs_dir()) == 0o700 and _mode(run_dir) == 0o700
    for path in run_dir.rglob("*"):
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
    written = "".join(p.read_text() for p in run_dir.rglob("*") if p.is_file())
    assert SECRET not in written  # describe() logs the names of -e variables, never a value


def test_ansible_runs_with_the_callers_umask_and_its_files_end_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ansible-playbook, and every module it runs on a host reached with ansible_connection=local (a login
    # node in the inventory), inherit the umask: under 077 a venv built there would be the user's alone.
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n  tasks: []\n")
    seen: list[int] = []

    def execute(build_kwargs: Any, handler: Any, log: Any) -> runner.Outcome:
        kwargs = build_kwargs(tmp_path / "pdd")
        umask = os.umask(0o022)
        os.umask(umask)
        seen.append(umask)
        events = Path(kwargs["artifact_dir"]) / str(kwargs["ident"]) / "job_events"
        events.mkdir(parents=True)  # as runner makes them: with the umask it was given
        (events / "1-start.json").write_text("{}")
        handler({"event": "playbook_on_stats", "event_data": {"ok": {"node1": 1}}})
        return runner.Outcome(rc=0, status="successful", canceled=False)

    monkeypatch.setattr(runner, "execute", execute)
    old_umask = os.umask(0o022)
    try:
        summary = engine.run_playbook("bootstrap", playbook, arguments.Options(inventory=inventory))
    finally:
        os.umask(old_umask)
    assert seen == [0o022]
    run_dir = Path(summary["run_dir"])
    assert _mode(run_dir / "job_events") == 0o700 and _mode(run_dir / "job_events" / "1-start.json") == 0o600


# ----- --env-file: the line number and the key, never the value ---------------------------------------

# Lines of an env file that are not NAME=VALUE, each with the key its message names (None: the line has
# no key to name) and SECRET where a careless message would quote it.
BAD_ENV_LINES = {
    "YAML style": (f"DB_PASSWORD: {SECRET}", "DB_PASSWORD"),
    "a blank in the name": (f"DB PASSWORD={SECRET}", "DB PASSWORD"),
    "a name starting with a digit": (f"1DB={SECRET}", "1DB"),
    "a dash in the name": (f"db-password={SECRET}", "db-password"),
    "no '=' at all": (SECRET, None),
    "export without '='": (f"export DB_PASSWORD {SECRET}", None),
    "an unclosed quote": (f"DB_PASSWORD='{SECRET}", "DB_PASSWORD"),
    "a name gpuprov sets": (f"GPUPROV_JOB_ID={SECRET}", "GPUPROV_JOB_ID"),
}


@pytest.mark.parametrize(("line", "key"), BAD_ENV_LINES.values(), ids=BAD_ENV_LINES.keys())
def test_an_env_file_error_names_the_line_and_key_not_the_value(
    line: str, key: str | None, tmp_path: Path
) -> None:
    from gpuprov.launch import options

    env_file = tmp_path / "job.env"
    env_file.write_text(f"# the job's settings\nOK=1\n{line}\n")
    with pytest.raises(BadInput) as info:
        options.read_env_file(env_file)
    message = info.value.message
    assert message.startswith(f"--env-file {env_file} line 3"), message
    assert SECRET not in message, message
    if key is not None:
        assert key in message, message


def test_launch_refuses_the_env_file_in_one_line_without_the_value(work: Path) -> None:
    (work / "job.env").write_text(f"DB_PASSWORD: {SECRET}\n")
    result = in_process.gpuprov(
        "launch", "-i", "inventory.ini", "--env-file", "job.env", "--dry-run", "train.py", cwd=work
    )
    line = one_error(result, ExitCode.BAD_INPUT)
    assert line.startswith("error: --env-file job.env line 1") and "DB_PASSWORD" in line, line
    assert SECRET not in result.stderr + result.stdout
