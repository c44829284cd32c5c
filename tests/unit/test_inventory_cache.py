"""The inventory cache: the same hosts as a full load, reused only while nothing they depend on changed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpuprov import hosts, inventory_cache


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(directory))
    return directory


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The full loads (Ansible's) that happen: one entry per load."""
    seen: list[str] = []
    real = hosts.load_with_warnings

    def counted(path: Path | str, limit: str | None = None) -> tuple[hosts.Inventory, list[str]]:
        seen.append(str(path))
        return real(path, limit)

    monkeypatch.setattr(hosts, "load_with_warnings", counted)
    return seen


def cluster(root: Path, extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    inventory = root / "inventory.ini"
    inventory.write_text(
        "[gpu_nodes]\nnode1 ansible_host=10.0.0.1\nnode2 ansible_host=10.0.0.2 ansible_port=2222\n"
        f"[gpu_nodes:vars]\nansible_user=ops\n{extra}"
    )
    (root / "group_vars").mkdir(exist_ok=True)
    (root / "group_vars" / "all.yml").write_text("gpuprov_gpu_count: 8\n")
    return inventory


def test_a_second_load_gives_the_same_hosts_without_ansible(
    tmp_path: Path, state: Path, loads: list[str]
) -> None:
    inventory = cluster(tmp_path / "c")
    first = inventory_cache.load(inventory)
    second = inventory_cache.load(inventory)
    assert len(loads) == 1
    assert second == first == hosts.load(inventory)
    assert [h.vars for h in second.hosts] == [h.vars for h in first.hosts]
    assert second.hosts[1].port == 2222 and second.hosts[0].vars["gpuprov_gpu_count"] == 8
    (stored,) = (state / "cache" / "inventory").iterdir()
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "group_vars" / "all.yml").write_text("gpuprov_gpu_count: 4\n"),
        lambda root: (root / "host_vars").mkdir() or (root / "host_vars" / "node1").write_text("a: 1\n"),
        lambda root: (root / "inventory.ini").write_text(
            (root / "inventory.ini").read_text().replace("10.0.0.2", "10.0.0.3")
        ),
    ],
    ids=["group_vars edited", "host_vars file added", "inventory edited"],
)
def test_any_change_to_what_ansible_reads_loads_again(
    tmp_path: Path, state: Path, loads: list[str], change: object
) -> None:
    root = tmp_path / "c"
    inventory = cluster(root)
    inventory_cache.load(inventory)
    change(root)  # type: ignore[operator]
    again = inventory_cache.load(inventory)
    assert len(loads) == 2
    assert again == hosts.load(inventory)
    assert [h.vars for h in again.hosts] == [h.vars for h in hosts.load(inventory).hosts]


def test_limit_and_ansible_environment_are_part_of_the_key(
    tmp_path: Path, state: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = cluster(tmp_path / "c")
    assert inventory_cache.load(inventory, "node1").names == ["node1"]
    assert inventory_cache.load(inventory).names == ["node1", "node2"]
    monkeypatch.setenv("ANSIBLE_INVENTORY_ENABLED", "ini")
    inventory_cache.load(inventory)
    assert len(loads) == 3
    inventory_cache.load(inventory)
    assert len(loads) == 3


@pytest.mark.parametrize(
    "extra",
    ["cuda_home='/usr/local/{{ inventory_hostname }}'\n", "ansible_become_password=s3cret-word\n"],
    ids=["a template", "a become password"],
)
def test_templates_and_secrets_are_never_kept(
    tmp_path: Path, state: Path, loads: list[str], extra: str
) -> None:
    inventory = cluster(tmp_path / "c", extra)
    inventory_cache.load(inventory)
    inventory_cache.load(inventory)
    assert len(loads) == 2
    stored = list((state / "cache" / "inventory").glob("*")) if (state / "cache").exists() else []
    assert not any(b"s3cret-word" in path.read_bytes() for path in stored)


def test_an_executable_inventory_may_be_a_script_and_is_loaded_every_time(
    tmp_path: Path, state: Path, loads: list[str]
) -> None:
    inventory = cluster(tmp_path / "c")
    os.chmod(inventory, 0o755)
    for _ in range(2):
        inventory_cache.load(inventory)
    assert len(loads) == 2


def test_a_damaged_cache_file_costs_only_a_full_load(tmp_path: Path, state: Path, loads: list[str]) -> None:
    inventory = cluster(tmp_path / "c")
    first = inventory_cache.load(inventory)
    (stored,) = (state / "cache" / "inventory").iterdir()
    stored.write_text('{"key": ')
    assert inventory_cache.load(inventory) == first
    assert inventory_cache.load(inventory) == first
    assert len(loads) == 2


def test_a_load_with_warnings_is_not_kept_and_warns_every_time(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = cluster(tmp_path / "c")
    calls: list[str] = []
    real = hosts.load_with_warnings

    def warning(path: Path | str, limit: str | None = None) -> tuple[hosts.Inventory, list[str]]:
        calls.append(str(path))
        return real(path, limit)[0], ["Found both group and host with same name: node1"]

    monkeypatch.setattr(hosts, "load_with_warnings", warning)
    for _ in range(2):
        inventory_cache.load(inventory)
        assert "Found both group and host with same name: node1" in capsys.readouterr().err
    assert len(calls) == 2


def test_an_unwritable_state_dir_only_costs_the_full_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loads: list[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(blocker / "state"))
    inventory = cluster(tmp_path / "c")
    assert inventory_cache.load(inventory).names == ["node1", "node2"]


@pytest.mark.parametrize("how", ["environment", "config file"])
def test_vars_plugins_set_explicitly_may_read_anything_so_nothing_is_kept(
    tmp_path: Path, state: Path, loads: list[str], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "environment":
        monkeypatch.setenv("ANSIBLE_VARS_ENABLED", "host_group_vars")
    else:
        config = tmp_path / "ansible.cfg"
        config.write_text("[defaults]\nvars_plugins_enabled = host_group_vars\n")
        monkeypatch.setenv("ANSIBLE_CONFIG", str(config))
    inventory = cluster(tmp_path / "c")
    inventory_cache.load(inventory)
    inventory_cache.load(inventory)
    assert len(loads) == 2


def test_a_file_in_a_linked_folder_is_part_of_the_key(tmp_path: Path, state: Path, loads: list[str]) -> None:
    shared = tmp_path / "shared" / "site"
    shared.mkdir(parents=True)
    (shared / "site.yml").write_text("gpuprov_site: a\n")
    root = tmp_path / "c"
    inventory = cluster(root)
    (root / "group_vars" / "gpu_nodes").symlink_to(shared, target_is_directory=True)
    (shared / "loop").symlink_to(shared, target_is_directory=True)  # a loop is read once
    assert inventory_cache.load(inventory).hosts[0].vars["gpuprov_site"] == "a"
    (shared / "site.yml").write_text("gpuprov_site: b\n")
    assert inventory_cache.load(inventory).hosts[0].vars["gpuprov_site"] == "b"
    assert len(loads) == 2
