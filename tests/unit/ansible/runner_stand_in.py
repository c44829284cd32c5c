"""A stand-in for gpuprov.ansible.runner.execute: the engine's whole run without Ansible."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gpuprov.ansible import runner

Events = list[tuple[str, dict[str, Any]]]


def install(monkeypatch: pytest.MonkeyPatch, events: Events, rc: int = 0) -> list[Mapping[str, Any]]:
    """runner.execute replaced: it builds runner's arguments (returned, one per run), feeds `events` to the
    tracker and ends with `rc`."""
    seen: list[Mapping[str, Any]] = []

    def execute(
        build_kwargs: Callable[[Path], Mapping[str, Any]],
        handler: Callable[[Mapping[str, Any]], bool],
        log: Callable[[str], None],
    ) -> runner.Outcome:
        seen.append(build_kwargs(Path("/tmp/pdd")))
        for kind, data in events:
            handler({"event": kind, "event_data": data})
        return runner.Outcome(rc=rc, status="successful" if rc == 0 else "failed", canceled=False)

    monkeypatch.setattr(runner, "execute", execute)
    return seen
