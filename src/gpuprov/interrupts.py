"""Ctrl-C at safe points, so an operation that creates things can always remove them again.

Inside `deferred()`, SIGINT and SIGTERM only set a flag; `check()` turns it into KeyboardInterrupt at
the next step boundary (gpuprov.sandbox.docker calls it around every docker command). A docker
command is thus never cut off half-way, which would leave an object the undo step cannot see yet.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_requested = threading.Event()
_shield = threading.local()


def _handler(signum: int, frame: FrameType | None) -> None:
    _requested.set()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _requested.clear()
    previous = {sig: signal.signal(sig, _handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
        check()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _requested.clear()


def requested() -> bool:
    return _requested.is_set()


def check() -> None:
    """Raise KeyboardInterrupt if an interrupt arrived (and this thread is not shielded)."""
    if _requested.is_set() and not getattr(_shield, "active", False):
        raise KeyboardInterrupt


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Run clean-up to the end even if the user presses Ctrl-C again."""
    _shield.active = True
    try:
        yield
    finally:
        _shield.active = False
