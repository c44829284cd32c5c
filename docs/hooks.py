"""MkDocs hook: fills docs/reference.md's role-variable tables from roles/*/defaults/main.yml at build time,
so the reference cannot drift from the roles (each role's README is tested against the same file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MARKER = "<!-- role-variables -->"
ROLES = Path(__file__).resolve().parent.parent / "roles"
LONGEST = 70  # a longer default (a mapping, a URL) is left to the role's README


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value or '""'
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).replace("\n...", "").strip()


def role_tables() -> str:
    parts = []
    for defaults in sorted(ROLES.glob("*/defaults/main.yml")):
        role = defaults.parent.parent.name
        rows = ["| variable | default |", "|---|---|"]
        for name, value in (yaml.safe_load(defaults.read_text(encoding="utf-8")) or {}).items():
            shown = _shown(value)
            # A pipe inside a code span does not split a cell in Python-Markdown's tables.
            cell = "(long: see the README)" if len(shown) > LONGEST else f"`{shown}`"
            rows.append(f"| `{name}` | {cell} |")
        parts.append(f"### {role}\n\nExplained in `roles/{role}/README.md`.\n\n" + "\n".join(rows))
    return "\n\n".join(parts) + "\n"


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARKER, role_tables()) if MARKER in markdown else markdown
