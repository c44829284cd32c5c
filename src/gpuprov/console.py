"""All terminal output goes through this module.

Messages go to stderr so that stdout carries only what a command is asked for (an inventory path, JSON),
which keeps gpuprov usable in shell pipelines.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.markup import escape

if TYPE_CHECKING:
    from rich.live import Live


class Verbosity(enum.IntEnum):
    QUIET = 0
    NORMAL = 1
    VERBOSE = 2


_err = Console(stderr=True, highlight=False, soft_wrap=True)
_out = Console(highlight=False, soft_wrap=True)
_verbosity = Verbosity.NORMAL


def set_verbosity(level: Verbosity) -> None:
    global _verbosity
    _verbosity = level


def verbosity() -> Verbosity:
    return _verbosity


def result(text: str) -> None:
    """What the command was asked for; printed to stdout even with --quiet."""
    _out.print(escape(text))


def info(text: str) -> None:
    if _verbosity >= Verbosity.NORMAL:
        _err.print(escape(text))


def step(text: str) -> None:
    """A step of a longer operation, so the user sees where time goes."""
    if _verbosity >= Verbosity.NORMAL:
        _err.print(f"[bold cyan]>[/] {escape(text)}")


def success(text: str) -> None:
    if _verbosity >= Verbosity.NORMAL:
        _err.print(f"[bold green]ok[/] {escape(text)}")


def detail(text: str) -> None:
    """Only with --verbose: commands run and their output."""
    if _verbosity >= Verbosity.VERBOSE:
        _err.print(f"[dim]{escape(text)}[/]")


def warning(text: str) -> None:
    _err.print(f"[bold yellow]warning:[/] {escape(text)}")


def error(text: str) -> None:
    _err.print(f"[bold red]error:[/] {escape(text)}")


def job_line(prefix: str, text: str, color: str) -> None:
    """One line of a job's output on stdout, prefixed 'host/rank |' (in the host's colour on a TTY)."""
    _out.print(f"[{color}]{escape(prefix)} |[/] {escape(text)}", highlight=False, markup=True)


def table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A table of results on stderr (with --quiet too: it explains a failure)."""
    from rich.table import Table

    grid = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(escape(cell) for cell in row))
    _err.print(grid)


def is_terminal() -> bool:
    """Whether messages go to a terminal (live displays) or to a log or pipe (plain lines)."""
    return _err.is_terminal


def live(renderable: RenderableType) -> Live:
    """A rich Live display on stderr, for progress that redraws in place; use as a context manager."""
    from rich.live import Live

    return Live(renderable, console=_err, refresh_per_second=4, transient=False)
