"""bootstrap --tags / --skip-tags: a name the playbook does not define is refused, as --limit refuses a
pattern that matches no host (Ansible would apply nothing, or skip nothing, and call the run a success)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov import resources
from gpuprov.ansible import arguments, tags
from gpuprov.errors import BadInput, ExitCode
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error

SITE = arguments.playbook_path("site.yml")
ROLES = resources.data_dir("roles")

UNKNOWN = {
    "a made-up tag": ["--tags", "no_such_tag"],
    "a role site.yml does not run": ["--tags", "slurm_pyxis"],
    "one unknown in a comma list": ["--tags", "all,no_such_tag"],
    "repeated, the second unknown": ["--tags", "all", "--tags", "typo"],
    "a mistyped --skip-tags": ["--skip-tags", "no_such_tag"],
    "case differs": ["--tags", "ALL"],
}


def _refused(given: list[str], tmp_path: Path) -> str:
    """bootstrap with these options on an unreachable one-host inventory: its one error line (exit 2), no run
    directory made."""
    (tmp_path / "inventory.ini").write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\n")
    state = tmp_path / "state"
    result = in_process.gpuprov(
        "bootstrap", "inventory.ini", *given, cwd=tmp_path, env={"GPUPROV_STATE_DIR": str(state)}
    )
    line = one_error(result, ExitCode.BAD_INPUT)
    assert not (state / "runs").exists()
    return line


@pytest.mark.parametrize("given", UNKNOWN.values(), ids=UNKNOWN.keys())
def test_an_unknown_tag_is_refused_before_a_run(given: list[str], tmp_path: Path) -> None:
    line = _refused(given, tmp_path)
    assert "no play, role or task of site.yml has this tag" in line, line
    assert "Ansible's own: all, tagged, untagged, always, never" in line, line


@pytest.mark.parametrize("tag", tags.SPECIAL)
def test_ansibles_own_tags_are_taken(tag: str) -> None:
    tags.check(SITE, ROLES, [tag], [tag])


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_tags_are_read_from_every_place_a_playbook_can_write_them(tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    _write(
        tmp_path / "site.yml",
        "- import_playbook: other.yml\n"
        "- hosts: all\n  tags: play_tag\n"
        "  roles:\n    - role: first\n      tags: [role_entry]\n    - second\n"
        "  tasks:\n"
        "    - block:\n        - {name: x, debug: {}, tags: 'in_block, also_in_block'}\n"
        "      tags: [block_tag]\n"
        "    - ansible.builtin.include_tasks: extra.yml\n"
        "    - ansible.builtin.include_role: {name: third}\n",
    )
    _write(tmp_path / "other.yml", "- hosts: all\n  tasks:\n    - {debug: {}, tags: [imported_playbook]}\n")
    _write(tmp_path / "extra.yml", "- {debug: {}, tags: task_file}\n")
    _write(roles / "first" / "tasks" / "main.yml", "- {debug: {}, tags: [first_task]}\n")
    _write(roles / "first" / "tasks" / "debian.yml", "- {debug: {}, tags: [first_on_debian]}\n")
    _write(roles / "second" / "handlers" / "main.yml", "- {name: h, debug: {}, tags: [handler]}\n")
    _write(roles / "second" / "meta" / "main.yml", "dependencies:\n  - role: fourth\n")
    _write(roles / "third" / "tasks" / "main.yml", "- {debug: {}, tags: [included_role]}\n")
    _write(roles / "fourth" / "tasks" / "main.yml", "- {debug: {}, tags: [dependency]}\n")
    _write(roles / "unused" / "tasks" / "main.yml", "- {debug: {}, tags: [unused_role]}\n")
    assert tags.defined(tmp_path / "site.yml", roles) == {
        "play_tag", "role_entry", "in_block", "also_in_block", "block_tag", "task_file", "imported_playbook",
        "first_task", "first_on_debian", "handler", "included_role", "dependency",
    }  # fmt: skip
    tags.check(tmp_path / "site.yml", roles, ["first_task", "handler"], ["dependency"])
    with pytest.raises(BadInput) as info:
        tags.check(tmp_path / "site.yml", roles, ["unused_role"], [])
    assert "its tags: also_in_block, block_tag, dependency, first_on_debian" in info.value.message


def test_a_templated_tag_lets_any_name_through(tmp_path: Path) -> None:
    _write(tmp_path / "site.yml", '- hosts: all\n  tasks:\n    - {debug: {}, tags: "{{ my_tags }}"}\n')
    assert tags.defined(tmp_path / "site.yml", tmp_path) is None
    tags.check(tmp_path / "site.yml", tmp_path, ["anything"], [])


EMPTY = {
    "empty": ["--tags", ""],
    "blank": ["--tags", "  "],
    "a trailing comma": ["--tags", "all,"],
    "two commas": ["--tags", "all,,never"],
    "an empty --skip-tags": ["--skip-tags", ""],
}


@pytest.mark.parametrize("given", EMPTY.values(), ids=EMPTY.keys())
def test_an_empty_tag_name_is_refused_not_dropped(given: list[str], tmp_path: Path) -> None:
    # Dropped, `--tags ''` would leave no tag filter: every task of site.yml would run.
    line = _refused(given, tmp_path)
    assert "a tag name is empty" in line, line
