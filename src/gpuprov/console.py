"""All terminal output goes through this module.

Messages go to stderr so that stdout carries only what a command is asked for (an inventory path, JSON),
which keeps gpuprov usable in shell pipelines.
"""

from __future__ import annotations

import enum

from rich.console import Console
from rich.markup import escape


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
