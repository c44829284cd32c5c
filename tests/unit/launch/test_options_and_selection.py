"""Option checks and host selection: every mistake is one BadInput line, before any host is touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov import host_options, hosts
from gpuprov.errors import BadInput
from gpuprov.launch import options, selection


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text("print('hi')\n")
    return path


def test_defaults(script: Path) -> None:
    opts = options.build(script=str(script))
    assert opts.script == script.resolve()
    assert opts.nproc == options.Nproc("auto")
    assert (opts.rdzv, opts.max_restarts, opts.master_port, opts.detach) == ("static", 0, None, False)


def test_missing_script(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"script .*nope\.py does not exist"):
        options.build(script=str(tmp_path / "nope.py"))


def test_script_found_in_workdir(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "t.py").write_text("")
    opts = options.build(script="t.py", workdir=str(tmp_path / "code"))
    assert opts.script == (tmp_path / "code" / "t.py").resolve()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 2, "hosts": "a"}, "exclude each other"),
        ({"nodes": 0}, "--nodes 0 is not valid"),
        ({"master_port": 70000}, "not a TCP port"),
        ({"rdzv": "etcd"}, "--rdzv 'etcd'"),
        ({"max_restarts": -1}, "--max-restarts -1"),
        ({"nproc": "many"}, "--nproc-per-node 'many'"),
        ({"nproc": "0"}, "--nproc-per-node '0'"),
        ({"hosts": " , "}, "--hosts is empty"),
        ({"hosts": "a,b,a"}, "names a more than once"),
        ({"env": ("NOEQUALS",)}, "not NAME=VALUE"),
        ({"env": ("1X=2",)}, "not NAME=VALUE"),
        ({"env": ("GPUPROV_JOB_ID=x",)}, "set by gpuprov"),
        ({"workdir": "/nonexistent/dir"}, "not a directory"),
        ({"template": "/nonexistent.j2"}, "--template"),
        ({"detach": True, "dry_run": True}, "exclude each other"),
        ({"grace_s": 0}, "--grace"),
    ],
)
def test_bad_options(script: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(BadInput, match=message) as info:
        options.build(script=str(script), **kwargs)  # type: ignore[arg-type]
    assert "\n" not in info.value.message


def test_nproc_resolution() -> None:
    assert options.parse_nproc("4").resolve(0) == 4
    assert options.parse_nproc("auto").resolve(0) == 1
    assert options.parse_nproc("auto").resolve(8) == 8
    assert options.parse_nproc("gpu").resolve(2) == 2
    assert options.parse_nproc("gpu").resolve(0) is None


def test_env_file_and_env_precedence(script: Path, tmp_path: Path) -> None:
    env_file = tmp_path / "job.env"
    env_file.write_text("# comment\n\nexport A=1\nB='two words'\nC=file\n")
    opts = options.build(script=str(script), env_file=str(env_file), env=("C=cli", "D=x=y"))
    assert opts.env == {"A": "1", "B": "two words", "C": "cli", "D": "x=y"}


def test_env_file_bad_line(script: Path, tmp_path: Path) -> None:
    env_file = tmp_path / "job.env"
    env_file.write_text("A=1\nnot a pair\n")
    with pytest.raises(BadInput, match=r"job\.env line 2"):
        options.build(script=str(script), env_file=str(env_file))


# ----- selection ----------------------------------------------------------------------------------------


@pytest.fixture
def inventory(tmp_path: Path) -> hosts.Inventory:
    path = tmp_path / "inventory.ini"
    known = tmp_path / "known_hosts"
    known.write_text("")
    path.write_text(
        "[gpu_nodes]\n"
        "node1 ansible_host=10.0.0.1 nccl_socket_ifname=eth0\n"
        "node2 ansible_host=10.0.0.2\n"
        "node3 ansible_host=10.0.0.3\n"
        f"[gpu_nodes:vars]\nansible_user=gpuprov\ngpuprov_known_hosts_file={known}\n"
    )
    return hosts.load(path)


def test_inventory_path_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUPROV_INVENTORY", raising=False)
    with pytest.raises(BadInput, match=r"no inventory found: pass -i INVENTORY, set \$GPUPROV_INVENTORY"):
        host_options.inventory_path(None)
    (tmp_path / "inventory.ini").write_text("")
    assert host_options.inventory_path(None) == Path("inventory.ini")
    monkeypatch.setenv("GPUPROV_INVENTORY", "/from/env.ini")
    assert host_options.inventory_path(None) == Path("/from/env.ini")
    assert host_options.inventory_path(Path("given.ini")) == Path("given.ini")


def test_select_nodes_and_hosts(inventory: hosts.Inventory) -> None:
    assert [h.name for h in selection.select(inventory, None, ())] == ["node1", "node2", "node3"]
    assert [h.name for h in selection.select(inventory, 2, ())] == ["node1", "node2"]
    assert [h.name for h in selection.select(inventory, None, ("node3", "node1"))] == ["node3", "node1"]


def test_select_too_many_nodes(inventory: hosts.Inventory) -> None:
    with pytest.raises(BadInput, match=r"--nodes 5 is more than the 3 host\(s\)"):
        selection.select(inventory, 5, ())


def test_select_unknown_host(inventory: hosts.Inventory) -> None:
    with pytest.raises(BadInput, match=r"--hosts: node9 not in .*node1, node2, node3"):
        selection.select(inventory, None, ("node1", "node9"))


def test_master_address_not_loopback(inventory: hosts.Inventory) -> None:
    node = inventory.host("node1")
    assert selection.master_address(node, 2) == "10.0.0.1"
    local = hosts.Host("m", "127.0.0.1", 22, "u", None, Path("/k"))
    assert selection.master_address(local, 1) == "127.0.0.1"
    with pytest.raises(BadInput, match="loopback"):
        selection.master_address(local, 2)
    override = hosts.Host(
        "m", "127.0.0.1", 22, "u", None, Path("/k"), vars={"gpuprov_master_addr": "10.1.1.1"}
    )
    assert selection.master_address(override, 2) == "10.1.1.1"
