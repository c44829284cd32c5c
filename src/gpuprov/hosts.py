"""The hosts of an inventory, read with Ansible's own loader into `Host` records.

`load()` reads an INI or YAML inventory exactly as ansible-playbook would (group_vars/ and host_vars/
beside it apply) and turns the hosts of the `gpu_nodes` group (or every host when there is no such group,
narrowed by a --limit pattern) into `Host` records with the connection settings gpuprov needs for its own
SSH work (gpuprov.ssh). Every mistake in the inventory is a BadInput naming the file and the place:
host names, addresses and ports are checked here, and `check_ssh_files()` checks the local key and
known_hosts files the hosts name, before any host is contacted.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import io
import os
import re
import shlex
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprov import console, yaml_limits
from gpuprov.errors import BadInput

GROUP = "gpu_nodes"
_YAML_SUFFIXES = (".yml", ".yaml", ".json")
_VARS_SUFFIXES = ("", *_YAML_SUFFIXES)  # the files Ansible reads in group_vars/ and host_vars/
# A host name ends up in file names (fact cache, job logs) and in commands: a DNS name or an address, no
# '/', no leading '.' or '-', no blank, no shell metacharacter. At most 200 characters, for bootstrap and
# launch alike (no host should bootstrap that cannot then run a job): a job's log is HOST.log, and a file
# name is at most 255 bytes (NAME_MAX), so the 253 of a full DNS name would not always fit.
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}")
_ADDRESS = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:%-]{0,252}|\[[0-9A-Fa-f:.%]+\]")
_KNOWN_HOSTS = "known_hosts file"
LOCK_VARIABLE = "gpu_stack"  # kept as written: versions are plain strings, never templates


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    port: int
    user: str
    key_file: Path | None
    known_hosts: Path
    become: bool = False
    become_method: str = "sudo"
    become_user: str = "root"
    become_password: str | None = field(default=None, repr=False)
    vars: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        """How messages name the host: 'node1 (10.0.0.5:22)'."""
        return f"{self.name} ({self.address}:{self.port})"


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: list[Host]
    group: str = GROUP  # the group the hosts came from ('all' when the inventory has no gpu_nodes)

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [host.name for host in self.hosts]


# ----- loading ----------------------------------------------------------------------------------------


def load(path: Path | str, limit: str | None = None) -> Inventory:
    """Read an inventory; every mistake in it is a BadInput with one line saying where and what.

    limit is an Ansible host pattern (as for --limit): only the hosts it matches are returned.
    """
    inventory, warnings = load_with_warnings(path, limit)
    show_warnings(inventory.path, warnings)
    return inventory


def show_warnings(path: Path, warnings: Sequence[str]) -> None:
    for text in warnings:
        console.warning(f"{path}: {text}")


def load_group(path: Path | str, group: str) -> list[Host]:
    """The hosts of another inventory group (e.g. slurm_controller, which need not be a GPU host), with
    the same connection settings and checks as load()'s; [] when the inventory has no such group. What
    Ansible warns about is left to load(), which the caller has run on the same file."""
    return load_with_warnings(path, group=group)[0].hosts


def load_with_warnings(
    path: Path | str, limit: str | None = None, group: str | None = None
) -> tuple[Inventory, list[str]]:
    """load(), with what Ansible warned about while loading returned instead of shown."""
    if not str(path).strip():
        # Path("") is ".": Ansible would read the current directory as an inventory and run its
        # executable files as inventory scripts.
        raise BadInput("the inventory path is empty; give the path of an INI or YAML inventory")
    path = Path(path).expanduser()
    _check_readable(path)
    _check_yaml_files(path)
    with _ansible_warnings() as warnings:
        try:
            inventory = _load(path, limit, group)
        except RecursionError:  # yaml_limits keeps files shallow; a template can still recurse
            raise BadInput(
                f"{path}: a value nests too deeply (or a template refers to itself); simplify it"
            ) from None
    return inventory, warnings


def _load(path: Path, limit: str | None, only_group: str | None = None) -> Inventory:
    # Imported here: ansible's modules are large and `gpuprov --help` should stay quick.
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    with _duplicate_yaml_keys_are_errors():
        loader = DataLoader()
        if path.is_file():
            _check_syntax(path, loader)
        manager = InventoryManager(loader=loader, sources=[str(path.resolve())])
        if not manager._inventory.processed_sources:  # every plugin declined or failed (already checked)
            raise BadInput(
                f"{path}: Ansible could not read this inventory; check it with ansible-inventory -i"
            )
        variables = VariableManager(loader=loader, inventory=manager)
        group = only_group or (GROUP if GROUP in manager.groups else "all")
        if only_group is not None and only_group not in manager.groups:
            return Inventory(path=path, hosts=[], group=only_group)
        members = manager.groups[group].get_hosts()
        where = f"group [{GROUP}]" if group == GROUP else "the inventory"
        if not members and only_group is None:
            raise BadInput(f"{path}: {where} has no hosts; add the GPU servers to it")
        if limit is not None:
            members = _limited(manager, limit, group, where, path)
        hosts = []
        for member in members:
            _check_host_name(path, member.name)
            try:
                host_vars = variables.get_vars(host=member, include_hostvars=False)
            except AnsibleError as exc:
                raise BadInput(f"{_where(path, exc)}: {_ansible_message(exc)}") from None
            hosts.append(_host(member.name, _templated(loader, host_vars)))
    _check_unique_addresses(path, hosts)
    return Inventory(path=path, hosts=hosts, group=group)


def _check_readable(path: Path) -> None:
    try:
        exists = path.exists()
    except OSError as exc:  # a name too long, a loop of links
        raise BadInput(
            f"inventory {path}: {exc.strerror or exc}; give the path of an INI or YAML inventory"
        ) from None
    if not exists:
        raise BadInput(f"inventory {path} does not exist; give the path of an INI or YAML inventory")
    if not os.access(path, os.R_OK) or (path.is_dir() and not os.access(path, os.X_OK)):
        raise BadInput(f"inventory {path} is not readable by user {getpass.getuser()}; check its permissions")
    if path.is_file():
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BadInput(f"inventory {path} cannot be read: {exc.strerror}") from None
        _check_text(path, data, "inventory")


def _check_text(path: Path, data: bytes, what: str) -> None:
    """A file that is not UTF-8 text (an archive, a key, a binary) makes Ansible's parsers fail with
    messages about its content; say what it is instead."""
    bad = data.find(b"\0")
    if bad < 0:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = exc.start
    if bad >= 0:
        raise BadInput(
            f"{what} {path} is not a text file (binary data at byte {bad}); "
            "give an INI or YAML file (UTF-8 text)"
        )


def _check_yaml_files(path: Path) -> None:
    """The YAML files Ansible will read (a YAML inventory, group_vars/ and host_vars/ beside it) within
    gpuprov.yaml_limits, and each vars file a mapping, before Ansible builds any of them."""
    base = path if path.is_dir() else path.parent
    inventories = [path] if path.is_file() else sorted(base.glob("*"))
    candidates = [p for p in inventories if p.suffix in _YAML_SUFFIXES and p.is_file()]
    vars_files = [
        p
        for folder in ("group_vars", "host_vars")
        for p in sorted((base / folder).rglob("*"))
        if p.is_file() and p.suffix in _VARS_SUFFIXES and not p.name.startswith(".")
    ]
    for file in [*candidates, *vars_files]:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise BadInput(f"{file} cannot be read: {exc.strerror}") from None
        if data.lstrip().startswith(b"$ANSIBLE_VAULT;"):
            continue  # a vault-encrypted file: Ansible decrypts it (with the vault password) and checks it
        is_vars = file in vars_files
        _check_text(file, data, "vars file" if is_vars else "inventory")
        try:
            kind = yaml_limits.check_text(data.decode("utf-8"))
        except yaml_limits.TooLarge as exc:
            raise BadInput(f"{file}: {exc}; gpuprov refuses to load it, simplify the file") from None
        if is_vars and kind not in (None, "mapping"):
            raise BadInput(
                f"{file}: a vars file is a mapping of variable names to values, and this one is a {kind}; "
                "write it as `name: value` lines"
            )


def _limited(manager: Any, limit: str, group: str, where: str, path: Path) -> list[Any]:
    """The hosts of group that --limit selects; a limit Ansible would read as 'every host' is refused.

    Ansible ignores an empty pattern, and a term it cannot parse or match (with a warning): then
    `--limit "$UNSET"` or `--limit '[[['` would provision the whole fleet."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import split_host_pattern

    if not limit.strip():
        raise BadInput(
            "--limit is empty; give a host pattern (e.g. node1 or 'gpu_nodes[0:3]': the first four), "
            "or leave --limit out to provision every host"
        )
    try:
        if not limit.startswith("@"):  # @FILE: a list of hosts, read by Ansible
            terms = split_host_pattern(limit)
            _check_limit_terms(limit, terms)
            # With one plain term, "matches no host of the group" below says it all.
            for term in terms if len(terms) > 1 or terms[0][0] in "!&" else []:
                if not manager.get_hosts(pattern=term.lstrip("!&")):
                    raise BadInput(
                        f"--limit {limit!r}: {term!r} matches no host in {path}; "
                        "fix the name or pattern (Ansible would ignore it)"
                    )
        manager.subset(limit)
        members: list[Any] = manager.get_hosts(pattern=group)
    except AnsibleError as exc:
        raise BadInput(f"--limit {limit!r}: {_ansible_message(exc)}") from None
    if not members:
        raise BadInput(f"--limit {limit!r} matches no host of {where} in {path}")
    return members


def _check_limit_terms(limit: str, terms: list[str]) -> None:
    """Every part of limit is a term: Ansible drops what it cannot split ('[[[', an unclosed '[')."""
    if not terms:
        raise BadInput(
            f"--limit {limit!r} has no host pattern in it; give names or patterns separated by ',' or ':'"
        )
    plain = [t for t in terms if not t.lstrip("!&").startswith("~")]  # ~REGEX terms have their own syntax
    if sum(t.count("[") for t in plain) != sum(t.count("]") for t in plain) or any(
        t.count("[") > 1 or (t.count("[") == 1 and not re.fullmatch(r"[^\[\]]*\[[^\[\]]*\]", t))
        for t in plain
    ):
        raise BadInput(
            f"--limit {limit!r}: unbalanced '[' or ']'; a range is written gpu_nodes[0:3] (the first four)"
        )
    brackets = sum(t.count("[") + t.count("]") for t in terms)
    if limit.count("[") + limit.count("]") != brackets:
        raise BadInput(
            f"--limit {limit!r}: unbalanced '[' or ']'; a range is written gpu_nodes[0:3] (the first four)"
        )


def is_host_name(text: str) -> bool:
    """Whether text may name a host in an inventory or a job record (it names files; see _HOST_NAME)."""
    return _HOST_NAME.fullmatch(text) is not None


def _check_host_name(path: Path, name: str) -> None:
    if not is_host_name(name):
        raise BadInput(
            f"{path}: host name {name!r} is not valid: use letters, digits, '.', '-', '_' and ':' "
            "(at most 200; a DNS name or an address; no '/', blanks or shell characters); "
            "put the address in ansible_host"
        )


@contextlib.contextmanager
def _ansible_warnings() -> Iterator[list[str]]:
    """Collect what Ansible's Display prints while loading, so it reaches the user through gpuprov.console

    (as one line per warning, and not at all when loading fails with an error of gpuprov's own)."""
    from ansible.utils.display import Display

    Display()  # the singleton sets up its streams once; do that on the real ones
    captured = io.StringIO()
    warnings: list[str] = []
    with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
        yield warnings
    for block in re.split(r"^\[WARNING\]: ", captured.getvalue(), flags=re.MULTILINE):
        first = block.strip().splitlines()[0] if block.strip() else ""
        if first:
            warnings.append(first)


@contextlib.contextmanager
def _duplicate_yaml_keys_are_errors() -> Iterator[None]:
    """A host (or variable) written twice in YAML is a mistake: make Ansible's YAML loader say so."""
    name = "ANSIBLE_DUPLICATE_YAML_DICT_KEY"
    previous = os.environ.get(name)
    os.environ[name] = "error"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def _check_syntax(path: Path, loader: Any) -> None:
    """Parse the file with the one plugin its format calls for, so a mistake is an error with its place.

    (Ansible's InventoryManager only warns about a file no plugin can parse and goes on with no hosts.)
    """
    from ansible.errors import AnsibleError

    if path.suffix in _YAML_SUFFIXES:
        try:
            data = loader.load_from_file(str(path.resolve()), cache="none")
        except AnsibleError as exc:
            raise BadInput(f"{_where(path, exc)}: {_ansible_message(exc)}") from None
        if not isinstance(data, Mapping):
            raise BadInput(
                f"{path}: a YAML inventory is a mapping of groups (all:, {GROUP}:); see inventory/sample"
            )
        _parse_with("yaml", path, loader)
    else:
        try:
            _parse_with("ini", path, loader)
        except BadInput:
            raise
        except AnsibleError as exc:
            line = _ini_error_line(path, loader)
            where = str(path)
            if line:
                lines = path.read_text(errors="replace").splitlines()
                text = lines[line - 1].strip() if line <= len(lines) else ""
                where = f"{path} line {line}" + (f" ({text[:60]!r})" if text else "")
            raise BadInput(f"{where}: {_ansible_message(exc)}") from None
        _check_ini_duplicates(path)


def _parse_with(plugin_name: str, path: Path, loader: Any, text: str | None = None) -> None:
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.plugins.loader import inventory_loader

    plugin = inventory_loader.get(plugin_name)
    manager = InventoryManager(loader=loader, sources=[], parse=False)
    source = str(path.resolve())
    if text is not None:
        with tempfile.TemporaryDirectory(prefix="gpuprov-inv-") as tmp:
            probe = Path(tmp) / path.name
            probe.write_text(text)
            plugin.parse(manager._inventory, loader, str(probe), cache=False)
        return
    try:
        plugin.parse(manager._inventory, loader, source, cache=False)
    except AnsibleError as exc:
        if plugin_name == "yaml":
            raise BadInput(f"{_where(path, exc)}: {_ansible_message(exc)}") from None
        raise


def _ini_error_line(path: Path, loader: Any) -> int | None:
    """The line an INI error is on: one past the longest prefix of the file that still parses.

    Ansible's INI plugin names the file but not the line; parsing prefixes finds it (inventories are small).
    """
    from ansible.errors import AnsibleError

    lines = path.read_text(errors="replace").splitlines(keepends=True)
    for count in range(len(lines) - 1, -1, -1):
        try:
            _parse_with("ini", path, loader, text="".join(lines[:count]))
        except AnsibleError:
            continue
        return count + 1
    return None


def _check_ini_duplicates(path: Path) -> None:
    """The same host listed twice in one [group] of an INI file: Ansible keeps the last, silently."""
    seen: dict[tuple[str, str], int] = {}
    section = "ungrouped"
    hosts_section = True
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            hosts_section = ":" not in section
            continue
        if not hosts_section:
            continue
        name = shlex.split(line, comments=True)[0] if line else ""
        key = (section, name)
        if key in seen:
            raise BadInput(
                f"{path} line {number}: host {name} is listed twice in [{section}] (first on line "
                f"{seen[key]}); keep one entry"
            )
        seen[key] = number


def _check_unique_addresses(path: Path, hosts: list[Host]) -> None:
    """Two inventory names for one machine would have Ansible configure it twice at the same time."""
    seen: dict[tuple[str, int], str] = {}
    for host in hosts:
        key = (host.address, host.port)
        if key in seen:
            raise BadInput(
                f"{path}: hosts {seen[key]} and {host.name} are the same machine "
                f"({host.address}:{host.port}); keep one entry"
            )
        seen[key] = host.name


def _where(path: Path, exc: BaseException) -> str:
    origin = None
    link: BaseException | None = exc
    while link is not None and origin is None:  # the place may be on an error the outer one wraps
        candidate = getattr(link, "obj", None)
        if getattr(candidate, "path", None):
            origin = candidate
        link = link.__cause__ or link.__context__
    line = getattr(origin, "line_num", None)
    column = getattr(origin, "col_num", None)
    origin_path = getattr(origin, "path", None) or str(path)
    if Path(origin_path) == path.resolve():
        origin_path = str(path)
    if line:
        return f"{origin_path} line {line}" + (f" column {column}" if column else "")
    return origin_path


def _ansible_message(exc: Exception) -> str:
    """Ansible's own error text, on one line, with the cause it wraps (which says what is wrong)."""
    message = str(getattr(exc, "message", "") or exc)
    message = message.replace("Failed to parse inventory: ", "")
    return " ".join(message.split())


# ----- host records -----------------------------------------------------------------------------------


def _templated(loader: Any, host_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The host's variables as plain Python values, templated where that needs nothing but inventory."""
    from ansible.template import Templar

    templar = Templar(loader=loader, variables=host_vars)
    result: dict[str, Any] = {}
    for key, value in host_vars.items():
        if key in ("groups", "hostvars", "omit"):
            continue
        # A value that needs facts or lookups at run time stays as written. The lock is never templated:
        # gpuprov.lock refuses a template there (it could read any file into the preflight output).
        if key != LOCK_VARIABLE:
            with contextlib.suppress(Exception):
                value = templar.template(value)
        result[str(key)] = _plain(value)
    return result


def _plain(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return str(value)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "yes", "true", "on", "y")
    return bool(value)


# What _host() and _known_hosts() read (a test keeps the three lists complete). REACH_VARIABLES say how
# gpuprov's own SSH layer reaches a host: address, port, user, key, known-hosts file.
REACH_VARIABLES = (
    "ansible_port",
    "ansible_ssh_port",
    "ansible_host",
    "ansible_ssh_host",
    "ansible_user",
    "ansible_ssh_user",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
    "gpuprov_known_hosts_file",
)
# Read for one option only: their UserKnownHostsFile (the rest, ProxyJump..., is for Ansible's ssh).
SSH_ARGS_VARIABLES = ("ansible_ssh_common_args", "ansible_ssh_extra_args", "ansible_ssh_args")
BECOME_VARIABLES = (
    "ansible_become",
    "ansible_become_method",
    "ansible_become_user",
    "ansible_become_password",
    "ansible_become_pass",
)
CONNECTION_VARIABLES = REACH_VARIABLES + BECOME_VARIABLES + SSH_ARGS_VARIABLES
GPU_COUNT_VARIABLE = "gpuprov_gpu_count"


def gpu_count(host_vars: Mapping[str, Any]) -> int | None:
    """gpuprov_gpu_count as launch and check both read it: None when unset, else a whole number, 0 or more;
    ValueError, the rule in words, for anything else ('abc', -3, 1.5, 8.0, true)."""
    given = host_vars.get(GPU_COUNT_VARIABLE)
    if given is None:
        return None
    text = str(given).strip()
    if isinstance(given, bool) or not re.fullmatch(r"[0-9]{1,6}", text):
        raise ValueError(f"{GPU_COUNT_VARIABLE} {given!r} is not a whole number of GPUs (0 or more)")
    return int(text)


def _host(name: str, v: dict[str, Any]) -> Host:
    port_value = v.get("ansible_port", v.get("ansible_ssh_port", 22))
    try:
        port = int(port_value)
    except (TypeError, ValueError):
        raise BadInput(f"host {name}: ansible_port {port_value!r} is not a number") from None
    if not 1 <= port <= 65535:  # ssh would wrap 99999 to another port
        raise BadInput(f"host {name}: ansible_port {port} is out of range; give a TCP port, 1-65535")
    address = str(v.get("ansible_host") or v.get("ansible_ssh_host") or name)
    if "{{" not in address and not _ADDRESS.fullmatch(address):  # a template is resolved by Ansible
        raise BadInput(
            f"host {name}: ansible_host {address!r} is not a host name or an address; fix it in the inventory"
        )
    key = v.get("ansible_ssh_private_key_file") or v.get("ansible_private_key_file")
    become_password = v.get("ansible_become_password") or v.get("ansible_become_pass") or None
    return Host(
        name=name,
        address=address,
        port=port,
        user=str(v.get("ansible_user") or v.get("ansible_ssh_user") or getpass.getuser()),
        key_file=Path(str(key)).expanduser() if key else None,
        known_hosts=_known_hosts(v),
        become=_truthy(v.get("ansible_become", False)),
        become_method=str(v.get("ansible_become_method") or "sudo"),
        become_user=str(v.get("ansible_become_user") or "root"),
        become_password=str(become_password) if become_password is not None else None,
        vars=v,
    )


def check_ssh_files(
    targets: Sequence[Host],
    where: str,
    fix: str,
    key_setting: str = "ansible_ssh_private_key_file",
    ansible_templates: bool = False,
) -> None:
    """Every host's SSH key is a readable local file, and its known_hosts file, where there is one, is a file.

    A wrong path is input to fix (exit 2), found before any host is contacted, not an unreachable host.
    The one line reads "{where}HOST[ and N more host(s)]: SSH key PATH (key_setting) WHAT; {fix}".
    ansible_templates: a path with '{{' in it is Ansible's to resolve at run time (bootstrap); the launcher
    reads paths as written, so there it is checked like any other.
    """
    problems: dict[tuple[str, Path], tuple[str, list[str]]] = {}
    for host in targets:
        for setting, path in ((key_setting, host.key_file), (_KNOWN_HOSTS, host.known_hosts)):
            if path is None or (ansible_templates and "{{" in str(path)):
                continue
            key = (setting, path)
            if key not in problems:
                what = _unreadable(path, missing_ok=setting == _KNOWN_HOSTS)
                if what is None:
                    continue
                problems[key] = (what, [])
            problems[key][1].append(host.name)
    for (setting, path), (what, names) in problems.items():
        others = f" and {len(names) - 1} more host(s)" if len(names) > 1 else ""
        thing = f"{setting} {path}" if setting == _KNOWN_HOSTS else f"SSH key {path} ({setting})"
        raise BadInput(f"{where}{names[0]}{others}: {thing} {what}; {fix}")


def _unreadable(path: Path, missing_ok: bool) -> str | None:
    """What keeps path from being read as a file, or None when it can be."""
    try:
        with path.open("rb"):
            return None
    except OSError as exc:
        if exc.errno == errno.ENOENT and missing_ok:
            return None
        return {
            errno.ENOENT: "does not exist",
            errno.EISDIR: "is a directory",
            errno.EACCES: f"is not readable by user {getpass.getuser()}",
        }.get(exc.errno or 0, f"cannot be read ({exc.strerror})")


def _known_hosts(v: Mapping[str, Any]) -> Path:
    explicit = v.get("gpuprov_known_hosts_file")
    if explicit:
        return Path(str(explicit)).expanduser()
    for name in SSH_ARGS_VARIABLES:
        found = ssh_option(str(v.get(name) or ""), "UserKnownHostsFile")
        if found:
            return Path(found.split()[0]).expanduser()
    return Path("~/.ssh/known_hosts").expanduser()


def ssh_option(args: str, option: str) -> str | None:
    """The value of `-o Option=value` (or `-oOption value`, any case) in an ssh argument string."""
    try:
        words = shlex.split(args)
    except ValueError:
        words = args.split()
    values = []
    for index, word in enumerate(words):
        text = None
        if word == "-o" and index + 1 < len(words):
            text = words[index + 1]
        elif word.startswith("-o") and len(word) > 2:
            text = word[2:]
        if text is None:
            continue
        key, _, value = text.replace("=", " ", 1).partition(" ")
        if key.strip().lower() == option.lower() and value.strip():
            values.append(value.strip())
    return values[0] if values else None  # ssh uses the first value it is given
