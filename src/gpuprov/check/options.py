"""What `gpuprov check` was asked for: the check names --only / --skip take, and the options. Light on
purpose: the command reads it for its help and input errors without loading SSH or the launch flow."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuprov.check import host_checks
from gpuprov.errors import BadInput

# Result names --only / --skip take; a check function can give several ("torch" gives "python" too).
PER_HOST = [*host_checks.CHECKS, "python"]
CROSS_HOST = ["versions-agree", "ports", "bandwidth"]
QUICK_SKIPS = ("ports", "bandwidth")  # --quick: the per-host checks and what follows from them only
ALL_NAMES = ["ssh", *PER_HOST, *CROSS_HOST]


@dataclass(frozen=True)
class CheckOptions:
    inventory: Path
    limit: str | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    quick: bool = False
    as_json: bool = False
    extra_vars: dict[str, Any] = field(default_factory=dict)
    verbose: bool = False


def parse_names(text: str | None, option: str) -> tuple[str, ...]:
    if text is None:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise BadInput(f"{option} is empty; give check names separated by commas ({', '.join(ALL_NAMES)})")
    unknown = [n for n in names if n not in ALL_NAMES]
    if unknown:
        raise BadInput(
            f"{option}: no check named {', '.join(map(repr, unknown))}; the checks are {', '.join(ALL_NAMES)}"
        )
    return names
