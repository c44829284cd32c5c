"""Roles, playbooks and Molecule scenarios read facts as ansible_facts['...'], not as injected names.

gpuprov runs Ansible with INJECT_FACTS_AS_VARS off (ansible-core 2.20 deprecates the injected names), so an
injected name would be undefined there. Every `ansible_` identifier in these files must be a magic or
connection variable Ansible sets itself; anything else is taken for a fact.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SUFFIXES = {".yml", ".yaml", ".j2"}

# Variables that are not facts (https://docs.ansible.com/ansible/latest/reference_appendices/special_variables.html
# and the connection and become variables of the plugins gpuprov uses), and ansible_facts itself.
NOT_FACTS = {
    "ansible_facts", "ansible_check_mode", "ansible_collection_name", "ansible_config_file",
    "ansible_dependent_role_names", "ansible_diff_mode", "ansible_forks", "ansible_index_var",
    "ansible_inventory_sources", "ansible_limit", "ansible_loop", "ansible_loop_var",
    "ansible_parent_role_names", "ansible_parent_role_paths", "ansible_playbook_python", "ansible_role_name",
    "ansible_role_names", "ansible_run_tags", "ansible_search_path", "ansible_skip_tags",
    "ansible_verbosity", "ansible_version", "ansible_managed", "ansible_failed_task", "ansible_failed_result",
    "ansible_host", "ansible_port", "ansible_user", "ansible_password", "ansible_connection",
    "ansible_private_key_file", "ansible_python_interpreter", "ansible_shell_type",
    "ansible_shell_executable", "ansible_pipelining", "ansible_timeout",
}  # fmt: skip
NOT_FACT_PREFIXES = ("ansible_play_", "ansible_ssh_", "ansible_become", "ansible_sudo")
IDENTIFIER = re.compile(r"(?<!\w)(ansible_\w+)")


def ansible_files() -> list[Path]:
    roots = [ROOT / "roles", ROOT / "playbooks", ROOT / "molecule", *ROOT.glob("tests/**/playbooks")]
    found = {p for root in roots if root.is_dir() for p in root.rglob("*") if p.suffix in SUFFIXES}
    return sorted(p for p in found if p.is_file())


def injected_fact_names(text: str) -> list[tuple[int, str]]:
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for name in IDENTIFIER.findall(line):
            if name not in NOT_FACTS and not name.startswith(NOT_FACT_PREFIXES):
                hits.append((number, name))
    return hits


def test_files_are_found() -> None:
    files = ansible_files()
    assert any(p.parts[-3:] == ("nvidia_driver", "tasks", "main.yml") for p in files)
    assert any("molecule" in p.parts for p in files)


def test_no_injected_fact_names() -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{number}: {name} (write ansible_facts['{name.removeprefix('ansible_')}'])"
        for path in ansible_files()
        for number, name in injected_fact_names(path.read_text())
    ]
    assert not problems, "injected fact names:\n" + "\n".join(problems)


def test_the_check_finds_injected_names() -> None:
    text = (
        "- name: Load vars\n"
        '  ansible.builtin.include_vars: "{{ ansible_os_family }}.yml"\n'
        "  when: hostvars[item]['ansible_default_ipv4'] is defined and ansible_eth0 is defined\n"
        "  loop: \"{{ groups['all'] | map('extract', hostvars, 'ansible_kernel') }}\"\n"
        '  vars: {ips: "{{ hostvars[item].ansible_all_ipv4_addresses }}"}\n'
    )
    assert injected_fact_names(text) == [
        (2, "ansible_os_family"),
        (3, "ansible_default_ipv4"),
        (3, "ansible_eth0"),
        (4, "ansible_kernel"),
        (5, "ansible_all_ipv4_addresses"),
    ]


def test_the_check_accepts_facts_and_magic_variables() -> None:
    text = (
        "  when: ansible_facts['os_family'] == 'Debian' and not ansible_check_mode\n"
        '  delegate_to: "{{ hostvars[item].ansible_host }}"\n'
        '  loop: "{{ ansible_play_hosts }}"\n'
        "# ansible_distribution\n"
    )
    assert injected_fact_names(text) == []
