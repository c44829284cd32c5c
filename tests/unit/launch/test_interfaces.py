"""Which interface gloo and the rendezvous use per host: probe.py route's parsing of the kernel's files, the
answer's parsing, the choice of GLOO_SOCKET_IFNAME and the preflight problems, against recorded answers
(tests/recorded/probe-route/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.launch import interfaces, preflight
from gpuprov.onhost import probe

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "probe-route"
# A Debian 12 sandbox node whose /etc/hosts is a stock install's (gpuprov.sandbox.etc_hosts), asked toward
# the other node; and a Docker host whose hostname resolves to 127.0.0.1, asked toward its gateway.
STOCK_NODE = RECORDED / "route-debian12-node-stock-etc-hosts.json"
HOST_127 = RECORDED / "route-eth0-hostname-127.0.0.1.json"


def route(path: Path = STOCK_NODE, toward: str = "10.0.0.1", **changes: object) -> interfaces.Route:
    found = json.loads(path.read_text())
    found.update(changes)
    parsed = interfaces.parse("route " + json.dumps(found), toward)
    assert parsed is not None
    return parsed


def host(**vars: object) -> hosts.Host:
    return hosts.Host("node2", "10.0.0.2", 22, "u", None, Path("/k"), vars=dict(vars))


def test_if_inet6_of_a_real_host_maps_each_address_to_its_interface() -> None:
    found = probe.ipv6_interfaces((RECORDED / "proc-net-if_inet6-docker-host.txt").read_text())
    assert found["::1"] == "lo"
    assert found["fd00::2"] == "eth0"
    assert found["fe80::fc:ff:fe00:1"] == "eth0"
    assert found["fe80::42:32ff:fe1b:1f4f"] == "docker0"


def test_the_first_hosts_line_naming_the_hostname() -> None:
    stock = "127.0.0.1\tlocalhost\n127.0.1.1\tnode1\n\n# IPv6\n::1     localhost ip6-localhost\n"
    assert probe.hosts_line(stock, "node1") == "127.0.1.1 node1"
    assert probe.hosts_line("10.0.0.5 node1.example.org node1 # static\n", "node1") == (
        "10.0.0.5 node1.example.org node1"
    )
    assert probe.hosts_line(stock, "node9") is None


def test_route_on_this_machine_toward_loopback_is_lo() -> None:
    found = probe.route("127.0.0.1")
    assert found["source"] == "127.0.0.1" and found["ifname"] == "lo"


def test_a_stock_node_is_loopback_by_name_but_has_an_interface_toward_its_peers() -> None:
    stock = route()
    assert stock.hostname_is_loopback and stock.hosts_line == f"127.0.1.1 {stock.hostname}"
    assert stock.ifname == "eth0" and stock.source is not None
    env = interfaces.socket_env(host(), stock)
    assert env == {"GLOO_SOCKET_IFNAME": "eth0"}
    assert interfaces.local_addr(stock) == stock.source
    assert interfaces.problems(host(), stock, multi_host=True) == []


@pytest.mark.parametrize(
    ("nccl", "gloo"),
    [
        ("eth0", "eth0"),  # one name the host has: gloo's too
        ("=eth0", "eth0"),  # NCCL's exact-match form
        ("^lo,docker0", "eth0"),  # exclusions mean nothing to gloo: the interface toward the peers
        ("eth", "eth0"),  # a prefix names no interface
        ("eth0,eth1", "eth0"),  # a list
        ("ib0", "eth0"),  # a name the host does not have
    ],
)
def test_an_nccl_value_is_gloos_only_when_it_is_one_name_the_host_has(nccl: str, gloo: str) -> None:
    env = interfaces.socket_env(host(nccl_socket_ifname=nccl), route())
    assert env == {"NCCL_SOCKET_IFNAME": nccl, "GLOO_SOCKET_IFNAME": gloo}


def test_the_users_gloo_value_wins_and_is_checked_against_the_hosts_interfaces() -> None:
    assert interfaces.socket_env(host(gloo_socket_ifname="lo"), route())["GLOO_SOCKET_IFNAME"] == "lo"
    assert interfaces.problems(host(gloo_socket_ifname="eth0,lo"), route(), multi_host=True) == []
    [problem] = interfaces.problems(host(gloo_socket_ifname="^lo"), route(), multi_host=True)
    assert problem.kind == preflight.INPUT
    assert problem.text.startswith("node2: gloo_socket_ifname '^lo' names no interface of the host (^lo;")
    fix = "not NCCL's ^/prefix syntax: set it to one (e.g. eth0, the interface toward 10.0.0.1)"
    assert fix in problem.text


def test_a_loopback_hostname_without_an_interface_is_one_problem_naming_the_hosts_line() -> None:
    lost = route(source=None, ifname=None, error="gaierror: [Errno -2] Name or service not known")
    [problem] = interfaces.problems(host(), lost, multi_host=True)
    assert problem.kind == preflight.NOT_READY
    assert problem.text.startswith(
        f"node2: its hostname {lost.hostname} resolves to loopback (/etc/hosts: `127.0.1.1 {lost.hostname}`)"
    )
    assert "set gloo_socket_ifname for the host, or map the hostname to its cluster address" in problem.text
    assert interfaces.socket_env(host(), lost) == {}
    assert interfaces.local_addr(lost) is None
    # One host: gloo on loopback is fine there; a hostname on the cluster address: gloo finds it.
    assert interfaces.problems(host(), lost, multi_host=False) == []
    assert interfaces.problems(host(), route(HOST_127, ifname=None, resolves=["10.0.0.2"]), True) == []


def test_a_host_whose_name_resolves_to_nothing_falls_back_to_loopback_in_gloo() -> None:
    assert route(resolves=[]).hostname_is_loopback
    assert not route(HOST_127, resolves=["192.0.2.2", "127.0.0.1"]).hostname_is_loopback


def test_anything_but_a_route_line_is_no_route() -> None:
    assert interfaces.parse("ok", "10.0.0.1") is None
    assert interfaces.parse("route {not json", "10.0.0.1") is None
    assert interfaces.parse('route {"source": "10.0.0.2"}', "10.0.0.1") is None  # no hostname


def test_a_template_without_the_jobs_environment_on_a_loopback_hostname(tmp_path: Path) -> None:
    bare = tmp_path / "bare.sh.j2"
    bare.write_text("exec torchrun --nnodes {{ nnodes }} {{ script | q }}\n")
    exporting = tmp_path / "env.sh.j2"
    exporting.write_text("{% for k, v in env.items() %}export {{ k }}={{ v | q }}\n{% endfor %}\n")
    checks = [preflight.HostCheck(host(), route=route()), preflight.HostCheck(host(), route=route())]
    checks[0].host = hosts.Host("node1", "10.0.0.1", 22, "u", None, Path("/k"))
    [problem] = interfaces.template_problems(checks, {"node1": bare, "node2": exporting})
    assert problem.text.startswith(f"node1: the template {bare} does not export the job's environment")
    assert interfaces.template_problems(checks, {"node1": exporting, "node2": None}) == []
    assert interfaces.template_problems(checks[:1], {"node1": bare}) == []
    named = [preflight.HostCheck(host(), route=route(HOST_127, resolves=["10.0.0.2"]))] * 2
    assert interfaces.template_problems(named, {"node2": bare}) == []
