"""All terminal output goes through this module.

Messages go to stderr so that stdout carries only what a command is asked for (an inventory path, JSON),
which keeps gpuprov usable in shell pipelines.
"""

from __future__ import annotations

import contextlib
import enum
import re
import unicodedata
from collections.abc import Iterator
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


def notice(text: str) -> None:
    """What the user must see before a command acts, even with --quiet (the inventory it chose itself)."""
    _err.print(f"[bold cyan]>[/] {escape(one_line(text))}")


def success(text: str) -> None:
    if _verbosity >= Verbosity.NORMAL:
        _err.print(f"[bold green]ok[/] {escape(text)}")


def detail(text: str) -> None:
    """Only with --verbose: commands run and their output."""
    if _verbosity >= Verbosity.VERBOSE:
        _err.print(f"[dim]{escape(text)}[/]")


# A message quotes what the user gave (a path, an argument, a line of a file); a 100 KB argument or a path
# with a newline must not turn the one line into a screenful or into two lines.
MAX_WORD = 200  # a longer run of non-blank characters is shown as its start and end
MAX_MESSAGE = 2000  # a longer message keeps its start and end
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD + 1},}}")


def one_line(text: str) -> str:
    """text as one printable line: control characters escaped (a newline shows as \\n), long words and
    long messages shortened in the middle, saying how many characters were left out."""
    text = "".join(_escaped(char) for char in text)
    text = _LONG_WORD.sub(lambda m: _elide(m.group(0), 120, 60), text)
    return _elide(text, MAX_MESSAGE - 500, 400) if len(text) > MAX_MESSAGE else text


def _escaped(char: str) -> str:
    # Cc: control characters (newline, tab, ESC ...); Zl/Zp: line and paragraph separators; Cs: the lone
    # surrogates that stand for undecodable bytes of a file name.
    if unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs"):
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(
            char, f"\\x{ord(char):02x}" if ord(char) < 256 else f"\\u{ord(char):04x}"
        )
    return char


def _elide(text: str, head: int, tail: int) -> str:
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}...[{len(text) - head - tail} characters left out]...{text[-tail:]}"


def warning(text: str) -> None:
    _err.print(f"[bold yellow]warning:[/] {escape(one_line(text))}")


def error(text: str) -> None:
    _err.print(f"[bold red]error:[/] {escape(one_line(text))}")


_job_console = _out
_hidden_marks: tuple[str, ...] = ()


@contextlib.contextmanager
def job_lines_on_stderr() -> Iterator[None]:
    """Jobs' lines go to stderr meanwhile: stdout keeps only a command's result (`bench --json`)."""
    global _job_console
    _job_console = _err
    try:
        yield
    finally:
        _job_console = _out


@contextlib.contextmanager
def protocol_lines_hidden(*marks: str) -> Iterator[None]:
    """Lines of a job that carry one of `marks` (`GPUPROV_ALLREDUCE {json}`: gpuprov's own result lines, read
    from the job's log) are not shown meanwhile; the job's log keeps them, and every other line (its
    errors) is still shown."""
    global _hidden_marks
    before = _hidden_marks
    _hidden_marks = before + marks
    try:
        yield
    finally:
        _hidden_marks = before


def job_line(prefix: str, text: str, color: str) -> None:
    """One line of a job's output on stdout, prefixed 'host/rank |' (in the host's colour on a TTY)."""
    if _hidden_marks and any(mark in text for mark in _hidden_marks):
        return
    _job_console.print(f"[{color}]{escape(prefix)} |[/] {escape(text)}", highlight=False, markup=True)


def table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A table of results on stderr (with --quiet too: it explains a failure)."""
    from rich.table import Table

    grid = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(escape(one_line(cell)) for cell in row))
    _err.print(grid)


def is_terminal() -> bool:
    """Whether messages go to a terminal (live displays) or to a log or pipe (plain lines)."""
    return _err.is_terminal


def live(renderable: RenderableType) -> Live:
    """A rich Live display on stderr, for progress that redraws in place; use as a context manager."""
    from rich.live import Live

    return Live(renderable, console=_err, refresh_per_second=4, transient=False)
