"""The CLI contract of every verb that acts on hosts (gpuprov/host_options.py, gpuprov/cli_options.py):

the inventory as INVENTORY or -i/--inventory with one default rule, --limit everywhere, --nodes/--hosts on
top for launch and bench, --json stored as `json`, and every exit through GpuprovError. Read from each
command's click parameters, so a new verb that forgets them fails here; driven in this process through
main() (tests/unit/in_process.py) where the subprocess is not the point.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from gpuprov import cli, cli_options, host_options, hosts
from gpuprov.bench import options as bench_options
from gpuprov.bootstrap import command as bootstrap_command
from gpuprov.check import options as check_options
from gpuprov.errors import BadInput, ExitCode, Finished
from gpuprov.launch import options as launch_options
from gpuprov.launch import selection
from tests.unit import in_process

# Verbs that do not act on an inventory's hosts: jobs, logs and stop act on a job (its record names its
# hosts); sandbox on local containers.
NOT_ON_HOSTS = {"jobs", "logs", "stop", "sandbox"}
# Verbs that take the inventory only as -i, and why: launch's arguments are SCRIPT and the script's own.
INVENTORY_ONLY_AS_OPTION = {"launch"}
WITH_NODES_AND_HOSTS = {"launch", "bench"}


@dataclass(frozen=True)
class _Reference:
    inventory: Path | None = host_options.inventory()
    limit: str | None = host_options.limit()
    nodes: int | None = host_options.nodes()
    hosts: tuple[str, ...] = host_options.hosts()


def _shape(param: click.Parameter) -> tuple[object, ...]:
    help_text = param.help if isinstance(param, click.Option) else None
    return (type(param).__name__, param.name, tuple(param.opts), help_text, param.metavar, str(param.type))


REFERENCE = {p.name: _shape(p) for p in cli_options.OptionSet(_Reference).params()}


def _commands() -> dict[str, click.Command]:
    """Every verb on hosts by its command line ("lock check": a group's commands are its verbs)."""
    context = click.Context(cli.cli)
    found: dict[str, click.Command | None] = {}
    for name in [name for name in cli.cli.list_commands(context) if name not in NOT_ON_HOSTS]:
        command = cli.cli.get_command(context, name)
        if isinstance(command, click.Group):
            found |= {
                f"{name} {sub}": command.get_command(context, sub) for sub in command.list_commands(context)
            }
        else:
            found[name] = command
    return {name: command for name, command in found.items() if command is not None}


def test_the_verbs_on_hosts_are_the_known_ones() -> None:
    assert sorted(_commands()) == [
        "bench", "bootstrap", "check", "launch", "lock check", "lock diff", "lock resolve", "upgrade",
    ]  # fmt: skip


@pytest.mark.parametrize("verb", sorted(_commands()))
def test_every_verb_on_hosts_takes_the_same_inventory_and_host_options(verb: str) -> None:
    params = {p.name: _shape(p) for p in _commands()[verb].params}
    wanted = ["inventory", "limit"]
    if verb not in INVENTORY_ONLY_AS_OPTION:
        wanted.append("inventory_arg")
    if verb in WITH_NODES_AND_HOSTS:
        wanted += ["nodes", "hosts"]
    for name in wanted:
        assert params.get(name) == REFERENCE[name], (verb, name)
    if verb in INVENTORY_ONLY_AS_OPTION:
        assert "inventory_arg" not in params
    json_flags = [p for p in _commands()[verb].params if "--json" in p.opts]
    assert all(p.name == "json" for p in json_flags), verb


def test_the_help_of_every_verb_on_hosts_shows_them() -> None:
    for verb in _commands():
        answer = in_process.gpuprov(*verb.split(), "--help")
        assert answer.returncode == 0
        assert "-i, --inventory INVENTORY" in answer.stdout and "--limit PATTERN" in answer.stdout, verb


def test_json_is_one_field_name() -> None:
    for cls in (bench_options.BenchOptions, check_options.CheckOptions, bootstrap_command.BootstrapOptions):
        assert "json" in cls.__dataclass_fields__ and "as_json" not in cls.__dataclass_fields__


# ----- the inventory: one default rule, INVENTORY or -i -------------------------------------------------

NO_INVENTORY = "error: no inventory found: pass -i INVENTORY, set $GPUPROV_INVENTORY, or put an inventory.ini"
VERB_ARGS = {"bootstrap": [], "check": [], "bench": [], "launch": ["train.py"]}


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return tmp_path


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> in_process.Result:
    base = {"HOME": str(cwd), "GPUPROV_STATE_DIR": str(cwd / "state")}
    return in_process.gpuprov(*args, cwd=cwd, env={**base, **(env or {})})


def _error(result: in_process.Result, code: int = ExitCode.BAD_INPUT) -> str:
    """The one error line (Ansible, imported by bootstrap, warns about this process's captured stdout)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == code and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.mark.parametrize("verb", sorted(VERB_ARGS))
def test_no_inventory_is_one_line_for_every_verb(verb: str, empty: Path) -> None:
    assert _error(_run(verb, *VERB_ARGS[verb], cwd=empty)).startswith(NO_INVENTORY)


@pytest.mark.parametrize("verb", sorted(VERB_ARGS))
def test_the_environment_variable_names_the_inventory(verb: str, empty: Path) -> None:
    result = _run(verb, *VERB_ARGS[verb], cwd=empty, env={"GPUPROV_INVENTORY": str(empty / "env.ini")})
    assert f"inventory {empty / 'env.ini'} does not exist" in _error(result)


@pytest.mark.parametrize("verb", ["bootstrap", "check", "bench"])
def test_inventory_as_positional_or_option_but_not_both(verb: str, empty: Path) -> None:
    for given in (["a.ini"], ["-i", "a.ini"], ["--inventory", "a.ini"]):
        assert "inventory a.ini does not exist" in _error(_run(verb, *given, cwd=empty)), given
    both = _error(_run(verb, "a.ini", "-i", "b.ini", cwd=empty))
    assert both == (
        "error: the inventory is given twice (a.ini as INVENTORY and b.ini as -i/--inventory); give it once"
    )


def test_launch_takes_the_inventory_as_option(empty: Path) -> None:
    result = _run("launch", "-i", "a.ini", "--dry-run", "train.py", "--lr", "0.1", cwd=empty)
    assert "inventory a.ini does not exist" in _error(result)


@pytest.mark.parametrize("verb", sorted(VERB_ARGS))
def test_an_empty_inventory_path_is_refused(verb: str, empty: Path) -> None:
    result = _run(verb, "-i", " ", *VERB_ARGS[verb], cwd=empty)
    assert _error(result) == "error: the inventory path is empty; give the path of an INI or YAML inventory"


def test_inventory_path_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUPROV_INVENTORY", raising=False)
    with pytest.raises(BadInput, match="no inventory found"):
        host_options.inventory_path(None)
    monkeypatch.setenv("GPUPROV_INVENTORY", "")  # empty: as if unset
    (tmp_path / "inventory.ini").write_text("")
    assert host_options.inventory_path(None) == Path("inventory.ini")
    monkeypatch.setenv("GPUPROV_INVENTORY", "~/env.ini")
    assert host_options.inventory_path(None) == Path("~/env.ini").expanduser()


# ----- --limit, then --nodes / --hosts ------------------------------------------------------------------


@pytest.fixture
def three(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    known = tmp_path / "known_hosts"
    known.write_text("")
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\n"
        "node1 ansible_host=127.0.0.1 ansible_port=1 gpuprov_master_addr=192.0.2.1\n"
        "node2 ansible_host=127.0.0.1 ansible_port=2\n"
        "node3 ansible_host=127.0.0.1 ansible_port=3\n"
        f"[gpu_nodes:vars]\ngpuprov_known_hosts_file={known}\n"
    )
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ["bootstrap", "inventory.ini"],
        ["check", "inventory.ini"],
        ["bench", "inventory.ini"],
        ["launch", "-i", "inventory.ini", "--dry-run", "train.py"],
    ],
    ids=lambda args: args[0],
)
def test_limit_that_matches_nothing_is_refused_by_every_verb(args: list[str], three: Path) -> None:
    verb, *rest = args
    line = _error(_run(verb, "--limit", "node9", *rest, cwd=three))
    assert "--limit 'node9'" in line and "node9" in line


DEFAULTED_ARGS = {"bootstrap": [], "check": [], "bench": [], "launch": ["--dry-run", "train.py"]}


@pytest.mark.parametrize("verb", sorted(DEFAULTED_ARGS))
@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["", "quiet"])
def test_a_defaulted_inventory_is_named_before_any_host(verb: str, quiet: list[str], three: Path) -> None:
    """No verb acts on an inventory it chose itself without saying which and why (bootstrap reboots);
    --limit node9 stops each verb where the inventory is read, before any SSH."""
    args = [*quiet, verb, "--limit", "node9", *DEFAULTED_ARGS[verb]]
    from_cwd = _run(*args, cwd=three)
    assert _error(from_cwd)  # the limit's one error line, after the inventory's line
    named = f"Inventory: {three / 'inventory.ini'} (./inventory.ini in the current directory)"
    assert from_cwd.stderr.splitlines()[0].endswith(named) and "Inventory" not in from_cwd.stdout
    (three / "env.ini").write_text((three / "inventory.ini").read_text())
    from_env = _run(*args, cwd=three, env={"GPUPROV_INVENTORY": str(three / "env.ini")})
    assert _error(from_env)
    assert from_env.stderr.splitlines()[0].endswith(
        f"Inventory: {three / 'env.ini'} (from $GPUPROV_INVENTORY)"
    )
    given = _run(verb, "-i", "inventory.ini", "--limit", "node9", *DEFAULTED_ARGS[verb], cwd=three)
    assert _error(given) and "Inventory:" not in given.stderr  # given on the command line: seen already


def test_limit_narrows_then_nodes_and_hosts_pick(three: Path) -> None:
    def chosen(**raw: object) -> list[str]:
        opts = launch_options.build(
            script=str(three / "train.py"), inventory=str(three / "inventory.ini"), **raw
        )
        return [host.name for host in selection.chosen(opts)[1]]

    assert chosen(limit="node2:node3") == ["node2", "node3"]
    assert chosen(limit="node2:node3", nodes=1) == ["node2"]
    assert chosen(limit="gpu_nodes[1:2]", hosts="node3,node2") == ["node3", "node2"]  # hosts keep their order
    with pytest.raises(BadInput, match=r"--nodes 3 is more than the 2 host\(s\) in .* --limit 'node2:node3'"):
        chosen(limit="node2:node3", nodes=3)
    with pytest.raises(BadInput, match=r"--hosts: node1 not in .* --limit 'node2:node3'"):
        chosen(limit="node2:node3", hosts="node1")


def test_the_limit_examples_select_what_they_say(tmp_path: Path) -> None:
    """Ansible's subscripts include both ends: the help's range example is checked against ansible-core,
    and the master under --limit is the first host in inventory order, not the pattern's first."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        "[gpu_nodes]\n" + "".join(f"node{i} ansible_host=127.0.0.{i}\n" for i in range(1, 9))
    )
    help_text = str(REFERENCE["limit"][3])
    example = re.search(r"'(gpu_nodes\[\d+:\d+\])' is the first four", help_text)
    assert example, help_text
    assert hosts.load(inventory, example.group(1)).names == ["node1", "node2", "node3", "node4"]
    assert "in inventory order" in help_text

    def master(**raw: object) -> str:
        opts = launch_options.build(script=str(tmp_path / "train.py"), inventory=str(inventory), **raw)
        return selection.chosen(opts)[1][0].name

    assert master(limit="node5,node2") == "node2"  # inventory order
    assert master(hosts="node5,node2") == "node5"  # the order given
    assert master(limit="node5,node2", hosts="node5,node2") == "node5"


def test_bench_limit_narrows_its_hosts(three: Path) -> None:
    opts = bench_options.build(inventory=str(three / "inventory.ini"), limit="node3", nodes=2)
    with pytest.raises(BadInput, match=r"--nodes 2 is more than the 1 host\(s\)"):
        selection.chosen(opts)


def test_limit_with_slurm_is_refused(three: Path) -> None:
    with pytest.raises(BadInput, match="--limit picks hosts for SSH launching"):
        launch_options.build(script=str(three / "train.py"), limit="node1", scheduler="slurm")


@pytest.mark.parametrize("limit", ["node1", "gpu_nodes:!node3", "gpu_nodes[0:1]"])
def test_limit_with_emit_sbatch_is_refused(three: Path, limit: str) -> None:
    # The script asks Slurm for a count only: --limit 'gpu_nodes:!node3' would not keep the job off node3.
    with pytest.raises(BadInput, match="an --emit-sbatch script asks Slurm for a node count"):
        launch_options.build(
            script=str(three / "train.py"), limit=limit, emit_sbatch=str(three / "job.sbatch")
        )
    assert not (three / "job.sbatch").exists()


# ----- every exit through GpuprovError ------------------------------------------------------------------


def test_no_command_calls_sys_exit() -> None:
    for target in sorted(set(cli._COMMAND_MODULES.values())):
        module = importlib.import_module(target.split(":")[0])
        source = Path(str(module.__file__)).read_text()
        assert "sys.exit(" not in source, target


def test_check_raises_its_exit_code(three: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuprov.check import command, flow

    monkeypatch.setattr(flow, "run", lambda opts: ExitCode.CHECK_COULD_NOT_RUN)
    opts = check_options.CHECK.build({"inventory": str(three / "inventory.ini")})
    with pytest.raises(Finished) as raised:
        command.check.callback(**{"inventory": str(three / "inventory.ini")})  # type: ignore[misc]
    assert raised.value.exit_code == ExitCode.CHECK_COULD_NOT_RUN and raised.value.message == ""
    assert opts.inventory == three / "inventory.ini"
    result = _run("check", "inventory.ini", cwd=three)
    assert result.returncode == ExitCode.CHECK_COULD_NOT_RUN and "error:" not in result.stderr
