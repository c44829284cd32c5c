"""network_tuning's tasks/firewall-sources.yml with real ansible-playbook: a run limited to one node still
reads every other node's addresses itself (a delegated setup, as kolla-ansible gathers facts outside
--limit), and a node that cannot be read turns pruning off instead of dropping its addresses.

node1 is the play (the `--limit`); node2 is a peer outside it, reached over a local connection, so its
addresses are this machine's; node3 is a peer whose SSH port refuses connections (unreachable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.local.roles.local_play import BIN, ROLES

LOCAL = f"ansible_connection=local ansible_python_interpreter={sys.executable}"
TASK_FILE = ROLES / "network_tuning" / "tasks" / "firewall-sources.yml"
DECIDED = (
    "{{ {'sources': __network_tuning_sources, 'unread': __network_tuning_unread,"
    " 'prune': __network_tuning_prune,"
    " 'node2': hostvars['node2'].ansible_facts.all_ipv4_addresses | default([])} | to_json }}"
)
UNREACHABLE = "ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh ansible_ssh_timeout=5"


def sources(
    tmp_path: Path, peers: list[str], extra: dict[str, Any] | None = None, play: str = "node1"
) -> dict[str, Any]:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\n" + "\n".join([f"node1 {LOCAL}", *peers]) + "\n")
    out = tmp_path / "out.json"
    playbook_play = {
        "hosts": play,
        "gather_facts": False,
        "vars": {
            "network_tuning_cluster_group": "gpu_nodes",
            "network_tuning_firewall_sources": [],
            "network_tuning_rendezvous_ports": "29400-29599",
            "network_tuning_ephemeral_ports": "32768-60999",
            **(extra or {}),
        },
        "tasks": [
            {"name": "Gather facts", "ansible.builtin.setup": {"gather_subset": ["!all", "network"]}},
            {"name": "The task file", "ansible.builtin.include_tasks": str(TASK_FILE)},
            {
                "name": "Write what it decided",
                "ansible.builtin.copy": {"dest": f"{out}-{{{{ inventory_hostname }}}}", "content": DECIDED},
            },
        ],
    }  # fmt: skip
    config = tmp_path / "ansible.cfg"  # none of the checkout's settings (its fact cache above all)
    config.write_text("")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([playbook_play], sort_keys=False))
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_CONFIG": str(config)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(Path(f"{out}-node1").read_text())
    result["stdout"] = proc.stdout
    return result


def test_a_limited_run_reads_the_peers_outside_it_and_prunes(tmp_path: Path) -> None:
    found = sources(tmp_path, [f"node2 {LOCAL} ansible_host=198.51.100.7"])
    assert found["node2"], "the peer outside the play was not asked for its addresses"
    assert found["sources"] == sorted(set(found["node2"]))
    assert "198.51.100.7" not in found["sources"]  # its ansible_host is not what it was read to have
    assert found["unread"] == [] and found["prune"] is True


def test_an_unreachable_peer_keeps_its_entries_and_its_ip_ansible_host_is_let_in(tmp_path: Path) -> None:
    found = sources(tmp_path, [f"node2 {LOCAL}", f"node3 {UNREACHABLE}"])
    assert found["unread"] == ["node3"] and found["prune"] is False
    assert "127.0.0.1" in found["sources"] and set(found["node2"]) <= set(found["sources"])
    assert "could not read the addresses of node3" in found["stdout"]
    assert "no address is removed" in " ".join(found["stdout"].split())


def test_listed_networks_are_used_as_they_are_and_nothing_is_read(tmp_path: Path) -> None:
    peers = [f"node2 {LOCAL}", f"node3 {UNREACHABLE}"]
    found = sources(tmp_path, peers, {"network_tuning_firewall_sources": ["10.10.0.0/16"]})
    assert found["sources"] == ["10.10.0.0/16"] and found["prune"] is True
    assert found["node2"] == []  # not asked


def test_two_hosts_in_the_run_share_the_peers_and_agree(tmp_path: Path) -> None:
    """node1 and node4 run; node2 and node3 are outside: each run host asks one of them."""
    found = sources(
        tmp_path, [f"node4 {LOCAL}", f"node2 {LOCAL}", f"node3 {UNREACHABLE}"], play="node1,node4"
    )
    other = json.loads((tmp_path / "out.json-node4").read_text())
    assert found["unread"] == other["unread"] == ["node3"]
    assert found["sources"] == other["sources"] and "127.0.0.1" in found["sources"]
    assert found["stdout"].count("(item=node2)") == 1 and found["stdout"].count("(item=node3)") == 1
