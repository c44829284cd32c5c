"""The tags a playbook defines, so that --tags and --skip-tags with a name it lacks are refused.

Ansible takes any tag: `--tags no_such_tag` selects no task and the run "succeeds" with nothing applied,
and a mistyped `--skip-tags` skips nothing. gpuprov refuses a name that no play, role, block or task of
the playbook carries (as --limit refuses a pattern that matches no host), and lists the ones it has.

The tags are read from the YAML itself, not from `ansible-playbook --list-tags` (a second Ansible start,
with the inventory, before every run): the playbook, the playbooks it imports, the task files it names, and
every file of the roles it uses (their tasks, handlers and meta dependencies, followed to the roles those
name). Reading a role's every file can only find more tags than Ansible's listing (a file included only on
one OS), never fewer; tests/local/bootstrap/test_tags.py compares the two for the shipped playbooks. A
templated tag ("{{ ... }}") is Ansible's to resolve at run time, so a playbook that has one accepts any name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gpuprov.errors import BadInput

# Tags Ansible itself gives a meaning to (https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_tags.html).
SPECIAL = ("all", "tagged", "untagged", "always", "never")
_YAML = (".yml", ".yaml")
_PLAYBOOK_KEYS = ("import_playbook", "ansible.builtin.import_playbook")
_TASK_FILE_KEYS = tuple(
    f"{prefix}{name}" for prefix in ("", "ansible.builtin.") for name in ("import_tasks", "include_tasks")
)
_ROLE_KEYS = tuple(
    f"{prefix}{name}" for prefix in ("", "ansible.builtin.") for name in ("import_role", "include_role")
)


def check(playbook: Path, roles_path: Path, tags: Iterable[str], skip_tags: Iterable[str]) -> None:
    """BadInput (one line) for a --tags or --skip-tags name that the playbook does not define."""
    given = [("--tags", tag) for tag in tags] + [("--skip-tags", tag) for tag in skip_tags]
    if not given:
        return
    known = defined(playbook, roles_path)
    if known is None:  # a templated tag: any name may be one
        return
    for option, tag in given:
        if tag not in known and tag not in SPECIAL:
            listed = ", ".join(sorted(known)) or "none"
            raise BadInput(
                f"{option} {tag}: no play, role or task of {playbook.name} has this tag; its tags: {listed} "
                f"(and Ansible's own: {', '.join(SPECIAL)}); give one of them, or leave {option} out"
            )


def defined(playbook: Path, roles_path: Path) -> set[str] | None:
    """Every tag written in the playbook and what it uses; None when one of them is templated."""
    reader = _Reader(roles_path)
    reader.file(playbook)
    return None if reader.templated else reader.tags


class _Reader:
    def __init__(self, roles_path: Path) -> None:
        self.roles_path = roles_path
        self.tags: set[str] = set()
        self.templated = False
        self.seen: set[Path] = set()

    def file(self, path: Path) -> None:
        import yaml

        path = path.resolve()
        if path in self.seen or not path.is_file():
            return
        self.seen.add(path)
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            return  # Ansible reports a file it cannot read, with its place, when it runs
        self.walk(data, path.parent)

    def walk(self, node: Any, base: Path) -> None:
        if isinstance(node, list):
            for item in node:
                self.walk(item, base)
            return
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key == "tags":
                self.add(value)
            elif key in _PLAYBOOK_KEYS or key in _TASK_FILE_KEYS:
                for name in _names(value, "file"):
                    self.file(base / name)
            elif key in _ROLE_KEYS:
                self.roles(_names(value, "name"))
            elif key in ("roles", "dependencies") and isinstance(value, list):
                self.roles(name for item in value for name in _names(item, "role", "name"))
                self.walk(value, base)  # a role entry's own tags
            else:
                self.walk(value, base)

    def add(self, value: Any) -> None:
        parts = value if isinstance(value, list) else str(value).split(",")
        for part in parts:
            tag = str(part).strip()
            if "{{" in tag or "{%" in tag:
                self.templated = True
            elif tag:
                self.tags.add(tag)

    def roles(self, names: Iterable[str]) -> None:
        for name in names:
            directory = self.roles_path / name.rsplit(".", 1)[-1]  # a collection's role: its last part
            for sub in ("tasks", "handlers", "meta"):
                found = sorted((directory / sub).rglob("*")) if (directory / sub).is_dir() else []
                for path in found:
                    if path.suffix in _YAML:
                        self.file(path)


def _names(value: Any, *keys: str) -> Iterator[str]:
    """The file or role name of an import/include (a string, or a mapping with one of keys)."""
    if isinstance(value, dict):
        value = next((value[k] for k in keys if k in value), None)
    if isinstance(value, str) and "{{" not in value:
        yield value
