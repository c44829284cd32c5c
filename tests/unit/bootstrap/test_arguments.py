"""The exact arguments gpuprov gives ansible-runner, and -e parsing."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpuprov import resources
from gpuprov.ansible import arguments
from gpuprov.ansible.arguments import Options
from gpuprov.errors import BadInput


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def build(
    options: Options, extravars: dict[str, object] | None = None, host_count: int = 3
) -> dict[str, object]:
    return arguments.runner_kwargs(
        options,
        playbook=arguments.playbook_path("site.yml"),
        extravars=extravars or {},
        host_count=host_count,
        private_data_dir=Path("/tmp/pdd"),
        artifact_dir=Path("/state/runs"),
        ident="20250101-000000-abcdef",
    )


def test_default_arguments(tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(["/opt/tools/bin", "/usr/bin"]))
    inventory = tmp_path / "inv.ini"
    kwargs = build(Options(inventory=inventory), {"gpu_stack": {"cuda_version": "12.4.1"}, "x": "1 2"})
    envvars = kwargs.pop("envvars")
    fact_cache = kwargs.pop("fact_cache")
    assert kwargs == {
        "private_data_dir": "/tmp/pdd",
        "project_dir": str(resources.data_dir("playbooks")),
        "playbook": "site.yml",
        "inventory": str(inventory.resolve()),
        "roles_path": [str(resources.data_dir("roles"))],
        "extravars": {"gpu_stack": {"cuda_version": "12.4.1"}, "x": "1 2"},  # a dict, never a -e string
        "forks": 3,
        "settings": {"pexpect_timeout": arguments.PEXPECT_TIMEOUT_S, "suppress_ansible_output": True},
        "artifact_dir": "/state/runs",
        "ident": "20250101-000000-abcdef",
        "fact_cache_type": "jsonfile",
        "rotate_artifacts": 0,
        "quiet": True,
        "verbosity": None,
    }
    assert Path(str(fact_cache)).parent == state_dir / "facts"
    assert envvars == {
        "PATH": os.pathsep.join([here, "/opt/tools/bin", "/usr/bin"]),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=120s -o ServerAliveInterval=15",
        "ANSIBLE_GATHERING": "smart",
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "600",
        "ANSIBLE_INJECT_FACT_VARS": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_FORCE_COLOR": "False",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
    }


@pytest.mark.parametrize(
    ("path", "expected_rest"),
    [
        (["/usr/local/bin", "/usr/bin"], ["/usr/local/bin", "/usr/bin"]),
        (["/usr/bin", "{here}", "/bin"], ["/usr/bin", "/bin"]),  # gpuprov's bin dir moves to the front
        (["{here}", "", "/bin", ""], ["/bin"]),  # empty entries (the working directory) are dropped
    ],
    ids=["prepended", "moved-first-once", "no-empty-entries"],
)
def test_search_path_puts_gpuprovs_python_first(
    monkeypatch: pytest.MonkeyPatch, path: list[str], expected_rest: list[str]
) -> None:
    """runner must find the ansible-playbook installed beside gpuprov, before any other on PATH."""
    here = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join(entry.format(here=here) for entry in path))
    assert arguments.search_path().split(os.pathsep) == [here, *expected_rest]


def test_search_path_without_path_uses_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PATH")
    here = str(Path(sys.executable).parent)
    default = [entry for entry in os.defpath.split(os.pathsep) if entry and entry != here]
    assert arguments.search_path().split(os.pathsep) == [here, *default]


def test_all_options(tmp_path: Path) -> None:
    options = Options(
        inventory=tmp_path / "inv.yml",
        limit="node1:node2",
        tags=("driver", "cuda"),
        skip_tags=("reboot",),
        check=True,
        diff=True,
        forks=7,
        verbosity=2,
    )
    kwargs = build(options, host_count=40)
    assert kwargs["limit"] == "node1:node2"
    assert kwargs["tags"] == "driver,cuda"
    assert kwargs["skip_tags"] == "reboot"
    assert kwargs["cmdline"] == "--check --diff"
    assert kwargs["forks"] == 7
    assert kwargs["verbosity"] == 2


def test_fact_cache_is_per_inventory(tmp_path: Path) -> None:
    one = arguments.fact_cache_dir(tmp_path / "a" / "inv.ini")
    two = arguments.fact_cache_dir(tmp_path / "b" / "inv.ini")
    assert one != two and one.parent == two.parent


@pytest.mark.parametrize(
    ("hosts", "requested", "forks"), [(1, None, 1), (4, None, 4), (500, None, 100), (4, 2, 2)]
)
def test_forks_sized_to_the_inventory(hosts: int, requested: int | None, forks: int) -> None:
    assert arguments.forks_for(hosts, requested) == forks


def test_forks_zero_is_refused() -> None:
    with pytest.raises(BadInput, match="--forks 0: give 1 or more"):
        arguments.forks_for(3, 0)


def test_extra_vars_in_order(tmp_path: Path) -> None:
    lock = tmp_path / "lock.yml"
    lock.write_text("gpu_stack:\n  cuda_version: '12.4.1'\nmode: file\n")
    as_json = tmp_path / "more.json"
    as_json.write_text('{"n": 3}')
    parsed = arguments.parse_extra_vars(["mode=cli", f"@{lock}", "x=a=b", f"@{as_json}", "empty="])
    assert parsed == {
        "mode": "file",
        "gpu_stack": {"cuda_version": "12.4.1"},
        "x": "a=b",
        "n": 3,
        "empty": "",
    }


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("novalue", "-e 'novalue': give KEY=VALUE or @FILE"),
        ("=x", "-e '=x': give KEY=VALUE or @FILE"),
        ("bad-name=1", "-e 'bad-name=1': 'bad-name' is not a valid variable name"),
    ],
)
def test_bad_extra_vars(item: str, message: str) -> None:
    with pytest.raises(BadInput) as info:
        arguments.parse_extra_vars([item])
    assert info.value.message == message


def test_missing_vars_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as info:
        arguments.parse_extra_vars([f"@{tmp_path}/nope.yml"])
    assert info.value.message == (
        f"-e @{tmp_path}/nope.yml: no such file; give the path of a YAML or JSON file of variables"
    )


def test_vars_file_syntax_error(tmp_path: Path) -> None:
    broken = tmp_path / "lock.yml"
    broken.write_text("gpu_stack:\n  cuda: [12\n")
    with pytest.raises(BadInput) as info:
        arguments.parse_extra_vars([f"@{broken}"])
    assert info.value.message.startswith(f"-e @{broken} line 3 column 1: not valid YAML")


def test_vars_file_not_a_mapping(tmp_path: Path) -> None:
    listed = tmp_path / "list.yml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(BadInput, match="must be a mapping of variable names to values"):
        arguments.parse_extra_vars([f"@{listed}"])


def test_describe_hides_extra_var_values(tmp_path: Path) -> None:
    kwargs = build(Options(inventory=tmp_path / "inv.ini"), {"ansible_become_password": "s3cret"})
    text = arguments.describe(kwargs)
    assert "ansible_become_password" in text and "s3cret" not in text


def test_linear_strategy_is_ansibles_default(tmp_path: Path) -> None:
    envvars = build(Options(inventory=tmp_path / "inv.ini", strategy="linear"))["envvars"]
    assert isinstance(envvars, dict)
    assert "ANSIBLE_STRATEGY" not in envvars
    assert "ANSIBLE_STRATEGY_PLUGINS" not in envvars


def test_mitogen_strategy_names_mitogens_plugins(tmp_path: Path) -> None:
    # The newest-Ansible lane's controller has no Mitogen (an optional extra).
    ansible_mitogen = pytest.importorskip("ansible_mitogen")

    envvars = build(Options(inventory=tmp_path / "inv.ini", strategy="mitogen"))["envvars"]
    assert isinstance(envvars, dict)
    plugins = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    assert envvars["ANSIBLE_STRATEGY_PLUGINS"] == str(plugins)
    assert envvars["ANSIBLE_STRATEGY"] == "mitogen_linear"
    assert envvars["ANSIBLE_TIMEOUT"] == "30"  # Mitogen's whole context start, not TCP alone
    assert (plugins / "mitogen_linear.py").is_file()
    # Everything else is as on the linear path: host key checking, pipelining, the fact cache.
    linear = arguments.envvars("linear")
    assert {k: v for k, v in envvars.items() if k in linear} == linear


def test_mitogen_strategy_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ansible_mitogen", None)  # find_spec then answers None
    with pytest.raises(
        BadInput, match=r"Mitogen for Ansible is not installed; pip install 'gpuprov\[mitogen\]'"
    ):
        arguments.strategy_envvars("mitogen")


def test_mitogen_too_old(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    pytest.importorskip("ansible_mitogen")

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.3.49")
    with pytest.raises(BadInput, match=r"mitogen 0\.3\.49 is installed, gpuprov needs 0\.3\.54 or newer"):
        arguments.strategy_envvars("mitogen")


@pytest.mark.parametrize(
    ("version", "release"),
    [("0.3.54", (0, 3, 54)), ("0.3.54.post1", (0, 3, 54)), ("0.4.0rc1", (0, 4, 0)), ("dev", ())],
)
def test_release_of_a_version(version: str, release: tuple[int, ...]) -> None:
    assert arguments._release(version) == release


def test_unknown_strategy() -> None:
    with pytest.raises(BadInput, match="give one of linear, mitogen"):
        arguments.strategy_envvars("free")
