"""gpuprov.ansible.tags reads a playbook's tags from its YAML; Ansible's own listing (`ansible-playbook
--list-tags`) must never hold a tag it missed, or bootstrap would refuse a tag that works.

Run on the shipped playbooks and on one that writes tags in every static place Ansible lists them from.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov import resources
from gpuprov.ansible import arguments, tags

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def listed_by_ansible(playbook: Path, roles: Path) -> set[str]:
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--list-tags", "-i", str(ROOT / "inventory" / "sample" / "inventory.ini"),
         str(playbook)],
        env={"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "ANSIBLE_ROLES_PATH": str(roles),
             "HOME": str(playbook.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found: set[str] = set()
    for inside in re.findall(r"TAGS: \[([^\]]*)\]", proc.stdout):
        found |= {tag.strip() for tag in inside.split(",") if tag.strip()}
    return found


@pytest.mark.parametrize("name", ["site.yml", "validate_inventory_and_lock.yml", "reboot.yml"])
def test_the_shipped_playbooks_tags_are_all_found(name: str) -> None:
    playbook = arguments.playbook_path(name)
    roles = resources.data_dir("roles")
    read = tags.defined(playbook, roles)
    assert read is not None
    assert listed_by_ansible(playbook, roles) <= read


def test_tags_in_every_static_place_are_found(tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    for path, text in {
        "site.yml": "- import_playbook: other.yml\n"
        "- hosts: all\n  gather_facts: false\n  tags: play_tag\n"
        "  roles:\n    - role: first\n      tags: [role_entry]\n    - second\n"
        "  tasks:\n    - block:\n        - {debug: {}, tags: 'in_block, also'}\n      tags: [block_tag]\n"
        "    - ansible.builtin.import_tasks: extra.yml\n",
        "other.yml": "- hosts: all\n  gather_facts: false\n  tasks:\n    - {debug: {}, tags: [imported]}\n",
        "extra.yml": "- {debug: {}, tags: task_file}\n",
        "roles/first/tasks/main.yml": "- {debug: {}, tags: [first_task]}\n",
        "roles/second/meta/main.yml": "dependencies:\n  - role: third\n",
        "roles/second/tasks/main.yml": "- {debug: {}, tags: [second_task]}\n",
        "roles/third/tasks/main.yml": "- {debug: {}, tags: [dependency]}\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    listed = listed_by_ansible(tmp_path / "site.yml", roles)
    assert listed == tags.defined(tmp_path / "site.yml", roles)
    assert {"play_tag", "role_entry", "block_tag", "task_file", "imported", "dependency"} <= listed
