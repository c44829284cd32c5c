"""SSH connections opened ahead: started once a launch knows its hosts, taken over by preflight.

Why: between choosing the hosts and preflight's connects, the controller still imports what launches
(plan, preflight, the push, the job's streams and jinja2), checks the script templates and lists the
workdir. The key exchange and authentication wait mostly on the network and on each host's sshd, so they
run in the background meanwhile instead of after (docs/performance.md "Overlapping the SSH connects").

Only after the input this needs is checked (the inventory, the hosts, the master's address, the hosts' SSH
key and known_hosts files, room in the state dir for the job's record) is any host contacted; what the
launch checks later (templates, workdir) can still end it with exit 2: then the connections are closed
having run nothing on any host. A connection preflight does not take is closed when the launch ends, or
when it opens if it was still under way. Host key checking is ssh.connect's, unchanged.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpuprov import hosts, ssh
from gpuprov.errors import BadInput
from gpuprov.launch import jobs, selection

if TYPE_CHECKING:
    from gpuprov.launch.options import LaunchOptions


class _Pending:
    """One host's connect, running in a thread of its own; take() waits for it."""

    def __init__(self, host: hosts.Host, slots: threading.BoundedSemaphore) -> None:
        self.host = host
        self.done = threading.Event()
        self.client: ssh.Client | None = None
        self.error: BaseException | None = None
        self.taken = False
        self.dropped = False  # the launch ended without taking it: close it once it is open
        self._lock = threading.Lock()
        self._slots = slots
        threading.Thread(target=self._connect, daemon=True, name=f"connect-ahead-{host.name}").start()

    def _connect(self) -> None:
        with self._slots:
            try:
                client = ssh.connect(self.host)
            except BaseException as exc:  # raised again in the thread that takes it (preflight's)
                self.error = exc
                client = None
        with self._lock:
            self.client = client
            self.done.set()
            if self.dropped and client is not None:
                client.close()

    def take(self) -> ssh.Client:
        self.done.wait()  # ssh.connect's own timeouts bound the wait
        self.taken = True
        if self.error is not None:
            raise self.error
        assert self.client is not None
        return self.client

    def drop(self) -> None:
        """Close the connection unused, now or (a connect still under way: Ctrl-C) when it opens."""
        with self._lock:
            self.dropped = True
            if self.client is not None:
                self.client.close()


class Ahead:
    """The hosts a launch chose (its inventory read once) and their connections under way."""

    def __init__(self, opts: LaunchOptions) -> None:
        self.opts = opts
        self.inventory, self.selected = selection.chosen(opts)
        self.pending: dict[str, _Pending] = {}

    def start(self) -> None:
        """Connect to every chosen host, unless the input the connects rely on is wrong: then preflight
        never runs, as plan() stops on that input with its own message."""
        if not self.opts.dry_run:
            jobs.check_room()  # exit 3 before any host is contacted, as flow.launch promises (it asks again)
        try:
            selection.master_address(self.selected[0], len(self.selected))
            hosts.check_ssh_files(self.selected, where="", fix="fix the path")
        except BadInput:
            return
        ssh.import_paramiko()  # here, not in the threads: no two threads importing the same modules
        slots = threading.BoundedSemaphore(ssh.MAX_PARALLEL)  # as many at once as preflight's fan_out
        self.pending = {h.name: _Pending(h, slots) for h in self.selected}

    def close_untaken(self) -> None:
        for pending in self.pending.values():
            if not pending.taken:
                pending.drop()


_current: Ahead | None = None  # the launch running in this process (one at a time: the CLI's)
_lock = threading.Lock()


@contextlib.contextmanager
def opened(opts: LaunchOptions) -> Iterator[None]:
    """Within: the chosen hosts are being connected to, for plan() and preflight to take."""
    global _current
    ahead = Ahead(opts)
    ahead.start()
    with _lock:
        _current = ahead
    try:
        yield
    finally:
        with _lock:
            _current = None
        ahead.close_untaken()


def chosen(opts: LaunchOptions) -> tuple[hosts.Inventory, list[hosts.Host]]:
    """selection.chosen(opts), read once: from the connections ahead when they were opened for opts."""
    with _lock:
        ahead = _current
    if ahead is not None and ahead.opts is opts:
        return ahead.inventory, ahead.selected
    return selection.chosen(opts)


def connect(host: hosts.Host) -> ssh.Client:
    """The host's connection opened ahead (its error raised here), else ssh.connect(host) now."""
    with _lock:
        pending = _current.pending.get(host.name) if _current is not None else None
    if pending is None or pending.taken or pending.host != host:
        return ssh.connect(host)
    return pending.take()
