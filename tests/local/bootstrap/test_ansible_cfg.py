"""The repository's ansible.cfg and the settings `gpuprov bootstrap` gives Ansible agree.

arguments.py is the source of truth. Ansible itself (`ansible-config dump`) resolves both: once with only
ansible.cfg, once with only gpuprov's environment and runner arguments (as ansible-runner turns them into
environment variables). So a misspelt key or a wrong section in ansible.cfg fails here too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuprov.ansible import arguments
from gpuprov.ansible.arguments import Options

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE_CFG = ROOT / "ansible.cfg"
ANSIBLE_CONFIG_TOOL = Path(sys.executable).parent / "ansible-config"

# gpuprov's own display choices for its logs, not for someone running ansible-playbook at a terminal.
GPUPROV_ONLY = {"ANSIBLE_NOCOLOR", "ANSIBLE_FORCE_COLOR", "LOCALHOST_WARNING", "INVENTORY_UNPARSED_WARNING"}
# Paths: gpuprov's are under its package and state dir, the checkout's under the checkout (checked below).
LOCATIONS = {"CONFIG_FILE", "DEFAULT_ROLES_PATH", "CACHE_PLUGIN_CONNECTION", "cache.jsonfile._uri"}


def resolved_settings(env: dict[str, str]) -> dict[str, Any]:
    """Every setting that differs from Ansible's default, as Ansible resolves it: base settings by name,
    plugin options as `type.plugin.option`."""
    import subprocess

    proc = subprocess.run(
        [str(ANSIBLE_CONFIG_TOOL), "dump", "--only-changed", "-t", "all", "-f", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd="/",  # no ansible.cfg from the working directory
    )
    settings: dict[str, Any] = {}
    for entry in json.loads(proc.stdout):
        if "name" in entry:
            settings[entry["name"]] = entry["value"]
            continue
        for group, plugins in entry.items():  # e.g. {"CONNECTION_PLUGINS": [{"ssh": [options]}]}
            kind = group.removesuffix("_PLUGINS").lower()
            for plugin in plugins if isinstance(plugins, list) else []:
                for name, options in plugin.items():
                    for option in options:
                        settings[f"{kind}.{name}.{option['name']}"] = option["value"]
    return settings


def clean_env(tmp_path: Path, config: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.defpath, "HOME": str(home), "ANSIBLE_CONFIG": str(config)}


@pytest.fixture(scope="module")
def from_cfg(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return resolved_settings(clean_env(tmp_path_factory.mktemp("cfg"), ANSIBLE_CFG))


@pytest.fixture(scope="module")
def from_gpuprov(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("gpuprov")
    empty = tmp / "empty.cfg"
    empty.write_text("")
    kwargs = arguments.runner_kwargs(
        Options(inventory=tmp / "inventory.ini"),
        playbook=arguments.playbook_path("site.yml"),
        extravars={},
        host_count=arguments.MAX_FORKS,
        private_data_dir=tmp / "pdd",
        artifact_dir=tmp / "runs",
        ident="x",
    )
    env = {
        **clean_env(tmp, empty),
        **kwargs["envvars"],
        # What ansible-runner makes of its arguments (ansible_runner/config/_base.py, runner.py).
        "ANSIBLE_CACHE_PLUGIN": kwargs["fact_cache_type"],
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": kwargs["fact_cache"],
        "ANSIBLE_ROLES_PATH": os.pathsep.join(kwargs["roles_path"]),
        "ANSIBLE_FORKS": str(kwargs["forks"]),
    }
    return resolved_settings(env)


def test_ansible_cfg_sets_what_gpuprov_sets(from_cfg: dict[str, Any], from_gpuprov: dict[str, Any]) -> None:
    expected = {k: v for k, v in from_gpuprov.items() if k not in GPUPROV_ONLY | LOCATIONS}
    actual = {k: v for k, v in from_cfg.items() if k not in LOCATIONS}
    assert actual == expected


def test_the_settings_that_matter_are_among_them(from_cfg: dict[str, Any]) -> None:
    # Guards the comparison above against both sides losing a setting together.
    assert from_cfg["HOST_KEY_CHECKING"] is True
    assert from_cfg["connection.ssh.host_key_checking"] is True
    assert from_cfg["ANSIBLE_PIPELINING"] is True
    assert from_cfg["connection.ssh.ssh_args"] == arguments.SSH_ARGS
    assert "ControlPersist" in from_cfg["connection.ssh.ssh_args"]
    assert from_cfg["DEFAULT_GATHERING"] == "smart"
    assert from_cfg["CACHE_PLUGIN"] == "jsonfile"
    assert from_cfg["CACHE_PLUGIN_TIMEOUT"] == arguments.FACT_CACHE_TIMEOUT_S
    assert from_cfg["DEFAULT_FORKS"] == arguments.MAX_FORKS
    assert from_cfg["INJECT_FACTS_AS_VARS"] is False


def test_ansible_cfg_paths_are_in_the_checkout(from_cfg: dict[str, Any]) -> None:
    assert from_cfg["DEFAULT_ROLES_PATH"] == [str(ROOT / "roles")]
    cache = Path(from_cfg["cache.jsonfile._uri"])
    assert cache.is_relative_to(ROOT / ".cache")
