"""Limits on the shape of a YAML (or JSON) file the user gives, checked before Ansible or PyYAML builds it.

Two kinds of file are not mistakes a loader reports, but make gpuprov hang or crash:

- aliases that multiply ("billion laughs": nine aliases of nine aliases of ...): PyYAML builds them as
  shared references in no time, but Ansible's variable merging and templating walk the expanded tree;
- deep nesting (thousands of `[`): every recursive walk (PyYAML's composer, Ansible's templar, gpuprov's own
  conversion of values) ends in a RecursionError.

`check` reads the file's event stream, which PyYAML parses without recursion, and counts what building it
would give: the nodes with every alias expanded, and the depth. An inventory or a vars file is far from
both limits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

MAX_DEPTH = 100  # levels of nested mappings and lists
MAX_NODES = 200_000  # values, with every alias counted as the whole tree it stands for


class TooLarge(ValueError):
    """The file is beyond a limit; the message says which (without the file's name)."""


@dataclass
class _Open:
    anchor: str | None
    nodes_before: int
    depth: int  # depth of this collection
    deepest: int  # the deepest level reached inside it, relative to the document


def check_text(text: str) -> str | None:
    """The top-level kind of the first document ('mapping', 'list', 'scalar', None when empty); raises
    TooLarge when expanding it would exceed the limits. A syntax error is left to the real loader:
    this returns None for text PyYAML cannot parse."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    nodes = 0
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, depth below it)
    stack: list[_Open] = []
    top: str | None = None
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if top is None and not stack:
                    top = "mapping" if isinstance(event, yaml.MappingStartEvent) else "list"
                nodes += 1
                depth = len(stack) + 1
                if depth > MAX_DEPTH:
                    raise TooLarge(f"it nests more than {MAX_DEPTH} levels deep")
                stack.append(_Open(event.anchor, nodes - 1, depth, depth))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                done = stack.pop()
                if stack:
                    stack[-1].deepest = max(stack[-1].deepest, done.deepest)
                if done.anchor:
                    sizes[done.anchor] = (nodes - done.nodes_before, done.deepest - done.depth + 1)
            elif isinstance(event, yaml.ScalarEvent):
                if top is None and not stack:
                    top = "scalar" if event.value not in ("", "~", "null", "Null", "NULL") else None
                nodes += 1
                if event.anchor:
                    sizes[event.anchor] = (1, 0)
            elif isinstance(event, yaml.AliasEvent):
                size, below = sizes.get(event.anchor or "", (1, 0))
                nodes += size
                if len(stack) + below > MAX_DEPTH:
                    raise TooLarge(
                        f"it nests more than {MAX_DEPTH} levels deep (through alias *{event.anchor})"
                    )
                if stack:
                    stack[-1].deepest = max(stack[-1].deepest, len(stack) + below)
            if nodes > MAX_NODES:
                raise TooLarge(
                    f"it expands to more than {MAX_NODES} values"
                    + (" (aliases of aliases multiply)" if sizes else "")
                )
    except yaml.YAMLError as exc:
        # the libyaml in PyYAML 6.0.4's wheels stops at its own nesting limit while it scans ahead,
        # before this walk reaches MAX_DEPTH: the same refusal, not a syntax error
        if "maximum nesting depth" in str(getattr(exc, "problem", "")):
            raise TooLarge(f"it nests more than {MAX_DEPTH} levels deep") from None
        return None
    return top


def check_file(path: Path) -> str | None:
    """check_text on a file's content (read as UTF-8, undecodable bytes replaced)."""
    return check_text(path.read_text(errors="replace"))
