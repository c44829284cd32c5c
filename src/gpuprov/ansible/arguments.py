"""Every argument gpuprov gives ansible-runner, built in this one module (and unit-tested as built).

Extra variables travel as a dict (runner writes them to its private data dir and passes `-e @file`), never
as hand-quoted `-e` strings. Ansible is configured through environment variables rather than an
ansible.cfg, so a user's own ansible.cfg cannot turn host key checking off or slow a run down. The
repository's ansible.cfg repeats these settings for plain `ansible-playbook` runs from a checkout
(tests/local/bootstrap/test_ansible_cfg.py checks that Ansible reads the same values from both):

- ANSIBLE_HOST_KEY_CHECKING=True: ansible-runner turns it off unless told; gpuprov never does.
- ANSIBLE_PIPELINING=True: a module runs in one SSH round trip instead of four (mkdir, put, chmod, run).
- ControlMaster/ControlPersist: one SSH connection per host for the whole run, kept for the next run.
- ANSIBLE_GATHERING=smart with a jsonfile fact cache under gpuprov's state dir: facts are gathered once
  per host and reused by later plays and by runs within FACT_CACHE_TIMEOUT_S.
- forks = number of hosts (capped): every host works at once, not five at a time.
- ANSIBLE_INJECT_FACT_VARS=False (the setting INJECT_FACTS_AS_VARS): roles read facts as
  ansible_facts['...'] only (ansible-core 2.20 deprecates the injected ansible_* names), so a role that
  still uses one fails here, not later.

One setting is a choice: the strategy (`--strategy` / GPUPROV_STRATEGY). `linear` is Ansible's own.
`mitogen` runs the same play through Mitogen for Ansible's `mitogen_linear` strategy (the optional
`gpuprov[mitogen]` extra): one persistent Python per host instead of a new interpreter, and a new
AnsiballZ payload to unpack, for every module run. It is off by default until the whole test suite has
passed with it; third-party strategy plugins are deprecated in ansible-core 2.19 (no removal date).
"""

from __future__ import annotations

import hashlib
import json
import keyword
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuprov import paths, resources, yaml_limits
from gpuprov.errors import BadInput

STRATEGIES = ("linear", "mitogen")
# The first Mitogen release that runs ansible-core 2.21's dnf module (it embeds a helper script that older
# releases cannot run); 0.3.54 is the one tested with gpuprov. https://github.com/mitogen-hq/mitogen/releases
MITOGEN_MIN_VERSION = (0, 3, 54)
MITOGEN_STRATEGY = "mitogen_linear"
# Mitogen's connect timeout (Ansible's `timeout`, 10 s by default) covers the whole start of a host's
# context: SSH, then a Python that receives Mitogen's core, then the sudo context; on a loaded host that took
# more than 10 s (a sandbox node reported "Connection timed out"). Plain SSH spends it on TCP alone.
MITOGEN_CONNECT_TIMEOUT_S = 30

MAX_FORKS = 100
FACT_CACHE_TIMEOUT_S = 600
# No -C: compression "will only slow down things on fast networks" (ssh(1)); on a cluster's network it only
# costs CPU on both ends for every module payload. Over a slow link, `Compression yes` for the hosts in
# ~/.ssh/config turns it back on (a command-line -C would override that choice).
SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=120s -o ServerAliveInterval=15"
PEXPECT_TIMEOUT_S = 0.25  # how often runner asks the cancel callback (and so how fast Ctrl-C acts)


@dataclass(frozen=True)
class Options:
    """What the user asked for on the command line."""

    inventory: Path
    extra_vars: tuple[str, ...] = ()  # as given: KEY=VALUE or @FILE, in order
    limit: str | None = None
    tags: tuple[str, ...] = ()
    skip_tags: tuple[str, ...] = ()
    check: bool = False
    diff: bool = False
    forks: int | None = None
    json: bool = False
    verbosity: int = 0
    strategy: str = "linear"  # one of STRATEGIES


def playbook_path(name: str) -> Path:
    """A playbook shipped with gpuprov, by its file name under playbooks/ (an absolute path stays itself)."""
    return resources.data_dir("playbooks") / name


# ----- -e ----------------------------------------------------------------------------------------------


def parse_extra_vars(items: Sequence[str]) -> dict[str, Any]:
    """-e KEY=VALUE and -e @FILE (YAML or JSON) merged in order, as ansible-playbook would (later wins)."""
    result: dict[str, Any] = {}
    for item in items:
        if item.startswith("@"):
            if not item[1:].strip():  # Path("") would be "."
                raise BadInput(f"-e {item!r}: the file name is empty; give -e @FILE (a YAML or JSON file)")
            result.update(_vars_file(Path(item[1:]).expanduser()))
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"-e {item!r}: give KEY=VALUE or @FILE")
        if not is_variable_name(key):
            raise BadInput(f"-e {item!r}: {key!r} is not a valid variable name")
        result[key] = value
    return result


NAME_RULE = "letters, digits and _, not starting with a digit"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_variable_name(key: object) -> bool:
    """Ansible's rule for a variable name (ansible.utils.vars.isidentifier): ASCII letters, digits and _,
    not starting with a digit, not a Python keyword (True, None and the like included)."""
    return isinstance(key, str) and _NAME.fullmatch(key) is not None and not keyword.iskeyword(key)


def _vars_file(path: Path) -> dict[str, Any]:
    """The variables of a -e @FILE. The file may be anything the user can read (-e @/etc/shadow): what is
    not a mapping of variable names is refused by line number, and no message quotes the file's text."""
    try:
        if not path.is_file():
            raise BadInput(f"-e @{path}: no such file; give the path of a YAML or JSON file of variables")
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise BadInput(f"-e @{path}: cannot be read: {exc.strerror}") from None
    try:
        yaml_limits.check_text(text)  # before PyYAML builds it: an alias bomb or deep nesting
    except yaml_limits.TooLarge as exc:
        raise BadInput(f"-e @{path}: {exc}; gpuprov refuses to load it, simplify the file") from None
    data = _checked_mapping(path, text)
    return {str(k): v for k, v in data.items()}


def _checked_mapping(path: Path, text: str) -> Mapping[str, Any]:
    import yaml

    what = "a variables file must be a mapping of variable names to values (YAML or JSON)"
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        # The parser quotes what it found ("found undefined alias 'x'"): the file's text, so left out.
        problem = re.sub(r"'[^']*'|\"[^\"]*\"", "...", problem)
        raise BadInput(f"-e @{path}{where}: not valid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(node, yaml.MappingNode) or not isinstance(data, Mapping):
        raise BadInput(f"-e @{path}: {what.removeprefix('a variables file ')}")
    for key, _ in node.value:
        merge = key.tag == "tag:yaml.org,2002:merge"
        if not merge and not (key.tag == "tag:yaml.org,2002:str" and is_variable_name(key.value)):
            raise BadInput(
                f"-e @{path}: line {key.start_mark.line + 1}: the key is not a valid variable name "
                f"({NAME_RULE}); {what}"
            )
    return data


# ----- runner ------------------------------------------------------------------------------------------


def forks_for(host_count: int, requested: int | None) -> int:
    if requested is not None:
        if requested < 1:
            raise BadInput(f"--forks {requested}: give 1 or more")
        return requested
    return max(1, min(host_count, MAX_FORKS))


def search_path() -> str:
    """PATH with the directory of gpuprov's Python first: runner finds the ansible-playbook installed with
    gpuprov (and Ansible its ssh helpers), even when the virtualenv is not activated."""
    here = str(Path(sys.executable).parent)
    rest = [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p and p != here]
    return os.pathsep.join([here, *rest])


def fact_cache_dir(inventory: Path) -> Path:
    """One fact cache per inventory, so two clusters with the same host names never share facts."""
    digest = hashlib.sha256(str(inventory.resolve()).encode()).hexdigest()[:12]
    return paths.state_dir() / "facts" / digest


def strategy_envvars(strategy: str) -> dict[str, str]:
    """Ansible's settings for the strategy: none for linear (Ansible's default); for mitogen, Mitogen's
    strategy plugins and its mitogen_linear strategy. Raises BadInput when Mitogen is asked for and this
    Python cannot import a release that runs gpuprov's ansible-core."""
    if strategy == "linear":
        return {}
    if strategy != "mitogen":
        raise BadInput(f"--strategy {strategy!r}: give one of {', '.join(STRATEGIES)}")
    return {
        "ANSIBLE_STRATEGY_PLUGINS": str(_mitogen_strategy_dir()),
        "ANSIBLE_STRATEGY": MITOGEN_STRATEGY,
        "ANSIBLE_TIMEOUT": str(MITOGEN_CONNECT_TIMEOUT_S),
    }


def _mitogen_strategy_dir() -> Path:
    import importlib.metadata
    import importlib.util

    install = "pip install 'gpuprov[mitogen]' in gpuprov's Python, or use --strategy linear"
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or spec.origin is None:
        raise BadInput(f"--strategy mitogen: Mitogen for Ansible is not installed; {install}")
    try:
        version = importlib.metadata.version("mitogen")
    except importlib.metadata.PackageNotFoundError:  # a source checkout on PYTHONPATH: no version to check
        version = None
    if version is not None and _release(version) < MITOGEN_MIN_VERSION:
        wanted = ".".join(map(str, MITOGEN_MIN_VERSION))
        raise BadInput(
            f"--strategy mitogen: mitogen {version} is installed, gpuprov needs {wanted} or newer; {install}"
        )
    return Path(spec.origin).parent / "plugins" / "strategy"


def _release(version: str) -> tuple[int, ...]:
    """(0, 3, 54) of "0.3.54" or "0.3.54.post1"; () when the version does not start with a number."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in match.group().split(".")) if match else ()


def envvars(strategy: str = "linear") -> dict[str, str]:
    return {
        "PATH": search_path(),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_SSH_ARGS": SSH_ARGS,
        "ANSIBLE_GATHERING": "smart",
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT": str(FACT_CACHE_TIMEOUT_S),
        "ANSIBLE_INJECT_FACT_VARS": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "True",
        "ANSIBLE_FORCE_COLOR": "False",
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        **strategy_envvars(strategy),
    }


def runner_kwargs(
    options: Options,
    *,
    playbook: Path,
    extravars: Mapping[str, Any],
    host_count: int,
    private_data_dir: Path,
    artifact_dir: Path,
    ident: str,
) -> dict[str, Any]:
    """The keyword arguments of ansible_runner.run() for this run of `playbook`."""
    cmdline = []
    if options.check:
        cmdline.append("--check")
    if options.diff:
        cmdline.append("--diff")
    kwargs: dict[str, Any] = {
        "private_data_dir": str(private_data_dir),
        "project_dir": str(playbook.parent),
        "playbook": playbook.name,
        "inventory": str(options.inventory.resolve()),
        "roles_path": [str(resources.data_dir("roles"))],
        "extravars": dict(extravars),
        "forks": forks_for(host_count, options.forks),
        "envvars": envvars(options.strategy),
        "settings": {"pexpect_timeout": PEXPECT_TIMEOUT_S, "suppress_ansible_output": True},
        "artifact_dir": str(artifact_dir),
        "ident": ident,
        "fact_cache_type": "jsonfile",
        "fact_cache": str(fact_cache_dir(options.inventory)),
        "rotate_artifacts": 0,  # gpuprov rotates whole run directories itself (runs.py)
        "quiet": True,  # events reach the terminal through gpuprov's display, not runner's echo
        "verbosity": options.verbosity or None,
    }
    if options.limit:
        kwargs["limit"] = options.limit
    if options.tags:
        kwargs["tags"] = ",".join(options.tags)
    if options.skip_tags:
        kwargs["skip_tags"] = ",".join(options.skip_tags)
    if cmdline:
        kwargs["cmdline"] = " ".join(cmdline)
    return kwargs


def describe(kwargs: Mapping[str, Any]) -> str:
    """The arguments for the run log, without extra variables' values (they may hold secrets)."""
    shown = {k: v for k, v in kwargs.items() if k != "extravars"}
    shown["extravars"] = sorted(kwargs.get("extravars", {}))
    return json.dumps(shown, indent=2, sort_keys=True, default=str)
