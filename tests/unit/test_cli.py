"""The real `gpuprov` command, driven as a user would, for input it must refuse before doing anything (the
list of refusals through main() in this process: tests/unit/in_process.py)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import gpuprov
from gpuprov import cli
from tests.unit import in_process

GPUPROV = [sys.executable, "-m", "gpuprov"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUPROV, *args], capture_output=True, text=True, env=env, timeout=60)


def one_error_line(proc: subprocess.CompletedProcess[str] | in_process.Result) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_version():
    proc = run("--version")
    assert proc.returncode == 0
    assert gpuprov.__version__ in proc.stdout


def listed_commands(help_text: str) -> set[str]:
    """The command names under "Commands:" in click's --help output."""
    section = help_text.split("Commands:", 1)[1]
    return {m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)\s", section, flags=re.MULTILINE)}


def documented_commands(prefix: str) -> set[str]:
    """The verbs the README's usage blocks (fenced code) show after `prefix`, e.g. "gpuprov sandbox"."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", readme, flags=re.MULTILINE | re.DOTALL)
    pattern = rf"^{re.escape(prefix)} ([a-z][a-z-]*)\b"
    return {m.group(1) for block in blocks for m in re.finditer(pattern, block, flags=re.MULTILINE)}


def test_help_lists_exactly_the_documented_commands_and_each_one_answers():
    """No undocumented or placeholder command in --help, none the README promises missing."""
    proc = run("--help")
    assert proc.returncode == 0
    commands = listed_commands(proc.stdout)
    assert commands == documented_commands("gpuprov")
    sandbox_help = run("sandbox", "--help")
    assert sandbox_help.returncode == 0
    verbs = listed_commands(sandbox_help.stdout)
    assert verbs == documented_commands("gpuprov sandbox")
    # Each one is wired to a command that parses its options (in-process: a subprocess each is slow).
    runner = CliRunner()
    for args in [[c] for c in sorted(commands)] + [["sandbox", v] for v in sorted(verbs)]:
        answer = runner.invoke(cli.cli, [*args, "--help"], prog_name="gpuprov")
        assert answer.exit_code == 0, (args, answer.output)
        assert answer.output.startswith(f"Usage: gpuprov {' '.join(args)} "), answer.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["sandbox", "up", "--os", "centos7"], "--os 'centos7' is not supported; choose from debian12"),
        (["sandbox", "up", "--nodes", "0"], "--nodes 0 is out of range; a sandbox has 1 to 16 nodes"),
        (["sandbox", "up", "--nodes", "17"], "--nodes 17 is out of range"),
        (["sandbox", "up", "--nodes", "two"], "'two' is not a valid integer"),
        (["sandbox", "up", "--name", "Bad Name"], "sandbox name 'Bad Name' is not valid"),
        (["sandbox", "up", "--bogus"], "No such option '--bogus'"),
        (["-v", "-q", "sandbox", "down"], "--verbose and --quiet exclude each other"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, expected, tmp_path):
    proc = in_process.gpuprov(*args, env={"GPUPROV_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert expected in one_error_line(proc)
    assert not list(Path(tmp_path).iterdir()), "bad input must leave nothing behind"


def test_inventory_of_a_missing_sandbox(tmp_path):
    proc = run(
        "sandbox", "inventory", "--name", "nosuch", env={**os.environ, "GPUPROV_STATE_DIR": str(tmp_path)}
    )
    assert proc.returncode == 2
    assert "no sandbox named 'nosuch' is up" in one_error_line(proc)


def test_engine_that_cannot_start(tmp_path):
    """A docker CLI with no engine and a dockerd that dies at once: one line, exit 3, nothing made."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    (fake_bin / "dockerd").write_text(
        "#!/bin/sh\necho 'failed to start daemon: permission denied' >&2\nexit 1\n"
    )
    for tool in fake_bin.iterdir():
        tool.chmod(0o755)
    state = tmp_path / "state"
    env = {
        **os.environ,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "GPUPROV_STATE_DIR": str(state),
        "GPUPROV_CACHE_DIR": str(tmp_path / "cache"),
    }
    proc = run("sandbox", "up", "--name", "noengine", env=env)
    assert proc.returncode == 3, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "the Docker engine (dockerd) exited with status 1 while starting" in line
    assert "permission denied" in line
    assert not state.exists()


HEAVY = ("paramiko", "ansible", "ansible_runner", "jinja2", "cryptography", "gpuprov.sandbox.cluster")
CHEAP_ARGS = [
    ["--help"],
    ["launch", "--help"],
    ["sandbox", "up", "--nodes", "0"],
    ["bootstrap", " "],
    ["launch", "--grace", "inf", "train.py"],
    ["stop"],
]


def test_help_and_input_errors_load_neither_paramiko_nor_ansible(tmp_path):
    """`import gpuprov.cli`, --help and errors found in the arguments alone cost a fraction of a second:
    the modules that reach hosts (paramiko, Ansible, the sandbox's cluster code) load only when a command
    needs them."""
    (tmp_path / "train.py").write_text("")
    script = (
        "import json, sys\n"
        "from gpuprov import cli\n"
        "codes = []\n"
        f"for argv in {CHEAP_ARGS!r}:\n"
        "    try:\n"
        "        cli.main(argv)\n"
        "    except SystemExit as exc:\n"
        "        codes.append(exc.code)\n"
        f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))\n"
        "print(json.dumps({'codes': codes, 'heavy': heavy}))\n"
    )
    env = {**os.environ, "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer["codes"] == [0, 0, 2, 2, 2, 2], proc.stderr
    assert answer["heavy"] == []
