"""This client attached to a job's hosts: their lines printed and logged, their ends collected.

One object per run, one method per event: a line, a host's exit, a lost host, and the teardown (stop the
job everywhere else). `gpuprov launch` attaches with fail_fast (the first failure tears the job down);
`gpuprov logs` attaches to watch only (nothing is stopped).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

from gpuprov import console, ssh
from gpuprov.errors import GpuprovError
from gpuprov.launch import jobs, push, stopping, stream


class AttachedJob:
    def __init__(
        self,
        job: jobs.Job,
        names: list[str],
        clients: dict[str, ssh.Client],
        printer: stream.Printer,
        *,
        fail_fast: bool,
    ) -> None:
        self.job = job
        self.names = names  # the hosts attached to, in order
        self.clients = clients
        self.printer = printer
        self.fail_fast = fail_fast
        self.python = {h.name: h.python for h in job.hosts}
        self.events: queue.Queue[stream.Event] = queue.Queue()
        self.streams: dict[str, stream.HostStream] = {}
        self.codes: dict[str, int | None] = {}
        self.lost: dict[str, str] = {}
        self.stopped_by_us: set[str] = set()
        self.first_failure: str | None = None
        self.teardown_started: float | None = None
        self.interrupted = False

    @property
    def running(self) -> list[str]:
        """Hosts that have neither reported an exit nor been lost."""
        return [n for n in self.names if n not in self.codes and n not in self.lost]

    def open(self, name: str, command: str) -> bool:
        """Run `command` on the host and stream it; False (the host counts as lost) when that fails."""
        return self._stream(name, lambda: ssh.open_channel(self.clients[name], command))

    def start(self, name: str, delivery: push.Delivery) -> bool:
        """Start the agent on the channel that pushed the job's files, and stream it (as open())."""
        return self._stream(name, lambda: delivery.start("attach"))

    def _stream(self, name: str, channel: Callable[[], ssh.Channel]) -> bool:
        try:
            self.streams[name] = stream.HostStream(name, channel(), self.events)
        except GpuprovError as exc:
            self.lost[name] = f"could not start: {exc}"
            self.first_failure = self.first_failure or name
            if self.fail_fast:
                self.teardown(f"{name} could not start the job")
            return False
        return True

    # ----- events -----

    def on_line(self, host: str, text: str) -> None:
        self.printer.line(host, text)

    def on_exit(self, host: str, code: int | None) -> None:
        self.codes[host] = code
        if not self.fail_fast or self.interrupted:
            return
        if code != 0 and self.first_failure is None and host not in self.stopped_by_us:
            self.first_failure = host
            self.teardown(f"{host} exited with {code}")

    def on_lost(self, host: str, why: str) -> None:
        self.lost[host] = why
        if not self.fail_fast or self.interrupted:
            return
        if self.first_failure is None:
            self.first_failure = host
        self.teardown(f"{host}: {why}")
        # Its agent stops the job when the channel dies; make sure over a fresh connection.
        stopping.stop_hosts({host: self.clients[host]}, self.job, self.python)

    def teardown(self, reason: str) -> None:
        """Stop the job on every host still running it (once; later calls do nothing)."""
        if self.teardown_started is not None:
            return
        self.teardown_started = time.monotonic()
        running = self.running
        if not running:
            return
        console.warning(f"{reason}: stopping the job on {', '.join(running)}")
        self.stopped_by_us.update(running)
        # Fast path: each host's agent stops the job when its channel's stdin closes; hosts whose channel
        # is gone get a separate `agent.py stop` (over a fresh connection if need be).
        rest = [n for n in running if n not in self.streams or not self.streams[n].request_stop()]
        if rest:
            stopping.stop_hosts(
                {n: self.clients[n] for n in rest if n in self.clients}, self.job, self.python
            )

    # ----- the loop -----

    def wait(self) -> None:
        """Handle events until every host has ended, or a teardown has waited long enough for them."""
        while self.running:
            if self.teardown_started is not None and (
                time.monotonic() - self.teardown_started > self.job.grace_s + stopping.STOP_EXTRA_S
            ):
                for name in self.running:
                    self.lost[name] = "did not report after teardown"
                return
            self._next(0.2)

    def interrupt(self) -> None:
        """Ctrl-C: tear the job down and wait (at most the grace period and a little) for the hosts."""
        self.interrupted = True
        self.teardown("interrupted")
        deadline = time.monotonic() + self.job.grace_s + stopping.STOP_EXTRA_S
        while self.running and time.monotonic() < deadline:
            self._next(0.2)

    def close(self) -> None:
        """Close the channels; lines still queued (after a lost host, a timeout) are printed and logged."""
        for s in self.streams.values():
            s.close()
        while not self.events.empty():
            event = self.events.get_nowait()
            if event.kind == "line":
                self.on_line(event.host, event.text)
        self.printer.close()

    def _next(self, timeout: float) -> None:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        if event.kind == "line":
            self.on_line(event.host, event.text)
        elif event.kind == "exit":
            self.on_exit(event.host, event.code)
        else:
            self.on_lost(event.host, event.text)
