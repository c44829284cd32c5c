"""How a check run is shown: a table (rich on a terminal, plain lines without one), failures first, each
with what to do; or every result as JSON on stdout (--json)."""

from __future__ import annotations

import json
from typing import Any

from gpuprov import console
from gpuprov.check import figures
from gpuprov.check.results import Result, Status, counts, ordered

COLUMNS = [
    "status",
    "check",
    "host",
    "measured",
    "expected",
    "unit",
    "source",
    "margin",
    "detail / what to do",
]


def _row(result: Result) -> list[str]:
    note = " -> ".join(part for part in (result.detail, result.action) if part)
    return [
        result.status.value,
        result.check,
        result.host,
        result.measured,
        result.expected,
        result.unit,
        result.source,
        result.margin,
        note,
    ]


def _line(result: Result) -> str:
    parts = [f"{result.status.value:<14} {result.check:<15} {result.host}"]
    if result.measured:
        parts.append(f"measured {result.measured}{' ' + result.unit if result.unit else ''}")
    if result.expected:
        parts.append(f"expected {result.expected}")
    if result.source:
        parts.append(f"({result.source})")
    if result.margin:
        parts.append(f"margin {result.margin}")
    if result.detail:
        parts.append(f"- {result.detail}")
    if result.action:
        parts.append(f"- what to do: {result.action}")
    return " ".join(parts)


def show(results: list[Result], verbose: bool = False) -> None:
    """Failures first; passes and what does not apply are counted, and listed with --verbose; then the
    figures measured (bandwidth, TFLOPS, versions) last, where the eye lands."""
    rows = ordered(results)
    if not verbose:
        rows = [r for r in rows if r.status not in (Status.PASS, Status.NOT_APPLICABLE)] or rows
    if console.is_terminal():
        console.table("gpuprov check", COLUMNS, [_row(r) for r in rows])
    else:
        for result in rows:
            console.info(console.one_line(_line(result)))
    found = counts(results)
    console.info(", ".join(f"{n} {status}" for status, n in found.items() if n))
    show_figures(results)


def show_figures(results: list[Result]) -> None:
    """The figures table (a rich table on a terminal, one line per figure without one)."""
    table = figures.rows(results)
    if not table:
        return
    if console.is_terminal():
        console.table("Measured", figures.COLUMNS, table)
        return
    console.info("Measured:")
    for figure, where, value, note in table:
        console.info(console.one_line(f"  {figure:<14} {where:<12} {value}{f'  ({note})' if note else ''}"))


def as_json(summary: dict[str, Any]) -> None:
    console.result(json.dumps(summary, indent=2))
