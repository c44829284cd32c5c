"""The hosts of an inventory as gpuprov.hosts.load read them last time, while nothing they came from changed.

Loading an inventory costs `gpuprov launch` about 0.17 CPU seconds before the first host is contacted
(Ansible's configuration, InventoryManager, VariableManager: benchmarks/launch_phases.py), and that is paid
again by every launch of an unchanged cluster. `load()` keeps the resolved Host records in the state dir,
keyed on everything Ansible's loader reads for them, and reuses them without importing Ansible:

- the content of the inventory file and of every file under group_vars/ and host_vars/ beside it;
- the content of every Ansible configuration file that could apply (ANSIBLE_CONFIG, ./ansible.cfg,
  ~/.ansible.cfg, /etc/ansible/ansible.cfg) and every ANSIBLE_* environment variable;
- the Ansible release, the loader's own code (hosts.py, this module), the user and home directory (the
  defaults of ansible_user and the known_hosts path), and the --limit pattern.

Only what is fully determined by those is kept; anything else is loaded every time, as before: an inventory
directory, an executable file (Ansible runs it as an inventory script), a YAML inventory naming a `plugin:`
(dynamic), any file with a template (`{{`, `{%`: a lookup can read anything) or vault data, a host with a
become password (no secret is written here), a load that gave warnings (they are shown every time), and
any setup where a vars plugin besides Ansible's host_group_vars may run (vars plugins enabled or a plugin
path given in the configuration or environment, or a file in Ansible's default vars plugin folders):
such a plugin may read anything.
A cache file that cannot be read or written only costs the full load.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from gpuprov import hosts, paths
from gpuprov.errors import GpuprovError

FORMAT = 1  # bump when the stored record changes shape
_DYNAMIC_YAML = re.compile(rb"^plugin\s*:", re.MULTILINE)
_NOT_KEPT = (b"{{", b"{%", b"$ANSIBLE_VAULT")
_CONFIG_FILES = ("ansible.cfg", "~/.ansible.cfg", "/etc/ansible/ansible.cfg")
# Where a vars plugin other than host_group_vars could come from (Ansible's DEFAULT_VARS_PLUGIN_PATH and
# VARS_PLUGINS_ENABLED, as environment variables and ansible.cfg keys).
_VARS_PLUGIN_FOLDERS = ("~/.ansible/plugins/vars", "/usr/share/ansible/plugins/vars")
_VARS_PLUGIN_SETTINGS = ("ANSIBLE_VARS_PLUGINS", "ANSIBLE_VARS_ENABLED")
_VARS_PLUGIN_KEYS = (b"vars_plugins", b"vars_plugins_enabled")


def load(path: Path | str, limit: str | None = None) -> hosts.Inventory:
    """hosts.load(path, limit), from the cache when nothing it depends on changed."""
    inventory_path = Path(path).expanduser()
    key = _key(inventory_path, limit)
    store = _store(inventory_path, limit) if key is not None else None
    if key is not None and store is not None:
        found = _read(store, key)
        if found is not None:
            return found
    inventory, warnings = hosts.load_with_warnings(inventory_path, limit)
    hosts.show_warnings(inventory.path, warnings)
    if key is not None and store is not None and not warnings and _keepable(inventory):
        _write(store, key, inventory)
    return inventory


def _key(path: Path, limit: str | None) -> str | None:
    """A digest of everything the loaded hosts depend on, or None when they depend on more."""
    try:
        if not path.is_file() or os.access(path, os.X_OK):
            return None
        inventory = path.read_bytes()
        if path.suffix in (".yml", ".yaml", ".json") and _DYNAMIC_YAML.search(inventory):
            return None
        files = {"inventory": inventory}
        for folder in ("group_vars", "host_vars"):
            for file in files_below(path.parent / folder):
                files[str(file.relative_to(path.parent))] = file.read_bytes()
    except OSError:
        return None
    if any(marker in data for data in files.values() for marker in _NOT_KEPT):
        return None
    context = _context(path, limit)
    if _other_vars_plugins(context):
        return None
    digest = hashlib.sha256()
    for name, data in [*sorted(files.items()), *context]:
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def files_below(folder: Path) -> list[Path]:
    """Every file under folder, through linked folders too (Ansible's vars plugin follows them; pathlib's
    rglob does not before Python 3.13); a folder reached twice (a link loop) is read once."""
    found: list[Path] = []
    seen: set[str] = set()
    for root, folders, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            folders.clear()
            continue
        seen.add(real)
        found += [Path(root, name) for name in names if os.path.isfile(os.path.join(root, name))]
    return sorted(found)


def _context(path: Path, limit: str | None) -> list[tuple[str, bytes]]:
    """What the hosts depend on besides the inventory's files, as (name, content) pairs."""
    parts = [
        ("format", str(FORMAT).encode()),
        ("path", str(path.resolve()).encode()),
        ("limit", repr(limit).encode()),
        ("user", _user().encode()),
        ("home", os.path.expanduser("~").encode()),
        ("env", json.dumps(sorted((k, v) for k, v in os.environ.items() if k[:8] == "ANSIBLE_")).encode()),
    ]
    config = [os.environ.get("ANSIBLE_CONFIG", ""), *_CONFIG_FILES]
    code = [hosts.__file__, __file__, _ansible_release()]
    for name in [*config, *code]:
        if name:
            with contextlib.suppress(OSError):
                parts.append((name, Path(name).expanduser().read_bytes()))
    return parts


def _other_vars_plugins(context: list[tuple[str, bytes]]) -> bool:
    """Whether a vars plugin besides host_group_vars may run: its output is not in the key."""
    if any(os.environ.get(name) for name in _VARS_PLUGIN_SETTINGS):
        return True
    configs = [
        data for name, data in context if name.endswith(".cfg") or name == os.environ.get("ANSIBLE_CONFIG")
    ]
    if any(key in data for data in configs for key in _VARS_PLUGIN_KEYS):
        return True
    for folder in _VARS_PLUGIN_FOLDERS:
        with contextlib.suppress(OSError):
            if any(Path(folder).expanduser().iterdir()):
                return True
    return False


def _user() -> str:
    """The login name hosts.py defaults ansible_user to; '' where there is none (a uid without a passwd
    entry), which a load then reports if a host needs it."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _ansible_release() -> str:
    """ansible/release.py (the installed ansible-core's version), found without importing Ansible."""
    spec = importlib.util.find_spec("ansible")
    locations = list(spec.submodule_search_locations or []) if spec else []
    return str(Path(locations[0]) / "release.py") if locations else ""


def _store(path: Path, limit: str | None) -> Path | None:
    """The one cache file of this inventory and limit (a newer load replaces it)."""
    try:
        root = paths.state_dir() / "cache" / "inventory"
    except GpuprovError:  # an unusable state dir: the verb reports it where it writes there
        return None
    name = hashlib.sha256(f"{path.resolve()}\0{limit!r}".encode()).hexdigest()[:24]
    return root / f"{name}.json"


def _keepable(inventory: hosts.Inventory) -> bool:
    return all(host.become_password is None for host in inventory.hosts)


def _read(store: Path, key: str) -> hosts.Inventory | None:
    try:
        record = json.loads(store.read_text(encoding="utf-8"))
        if record.get("key") != key:
            return None
        return hosts.Inventory(
            path=Path(record["path"]),
            hosts=[_host(entry) for entry in record["hosts"]],
            group=str(record["group"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _host(entry: dict[str, Any]) -> hosts.Host:
    key_file = entry.pop("key_file")
    known_hosts = entry.pop("known_hosts")
    return hosts.Host(
        **entry,
        key_file=Path(key_file) if key_file is not None else None,
        known_hosts=Path(known_hosts),
    )


def _write(store: Path, key: str, inventory: hosts.Inventory) -> None:
    record = {
        "key": key,
        "path": str(inventory.path),
        "group": inventory.group,
        "hosts": [_entry(host) for host in inventory.hosts],
    }
    try:
        paths.write_private_json(store, record)
    except (OSError, TypeError, ValueError):
        return  # not kept: the next launch loads the inventory again


def _entry(host: hosts.Host) -> dict[str, Any]:
    return {
        "name": host.name,
        "address": host.address,
        "port": host.port,
        "user": host.user,
        "key_file": str(host.key_file) if host.key_file is not None else None,
        "known_hosts": str(host.known_hosts),
        "become": host.become,
        "become_method": host.become_method,
        "become_user": host.become_user,
        "become_password": None,
        "vars": host.vars,
    }
