"""Preflight: every check that can fail before any rank starts, on all hosts at once, all problems together.

Per host: SSH (host key checked), then what the job's environment answers (gpuprov.launch.environments:
for host-python, the Python env from the python_env role's fact file, `import torch`, torch / CUDA / NCCL
versions, GPU count). Across hosts: the environment's versions agree, the master port is free on the
master, and every other host can open a TCP connection to the master's address and port. What runs on the
hosts in Python is probe.py. Problems are counted by kind, and the worst decides the exit code (6, 7, 2).

Round trips: one command per host (the environment's host check). Its channel stays open to the end of
preflight: on it the master then binds the port and every other host connects to it (they need the port
the master found free), while a first `import torch` runs; each host also says there which interface and
address carry its traffic to the master (the master: to the first worker), for gloo and the rendezvous
(gpuprov.launch.interfaces). The SSH connections stay open for the push and
the start.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuprov import hosts, onhost, porttest, ssh
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import connect_ahead
from gpuprov.launch.options import DEFAULT_MASTER_PORT, MASTER_PORT_SEARCH, Nproc

if TYPE_CHECKING:
    from gpuprov.launch.environments import Environment
    from gpuprov.launch.interfaces import Route
    from gpuprov.launch.launchers import Launcher

REACH_TIMEOUT_S = 5.0


def probe_code() -> str:
    return onhost.program("probe.py")  # its programs for the hosts, stdlib only


def probe_command(python: str, *args: str) -> str:
    """Run a probe.py command on a host with the env's python; the file's text goes as `python -c`."""
    return onhost.python_command(python, probe_code(), *args)


# What a problem keeps from being true; the worst decides the exit code, as in bootstrap's preflight.
UNREACHABLE = "unreachable"  # no SSH session, or it broke: exit 6
NOT_READY = "not ready"  # the host answers but cannot run the job (env, torch, versions, port): exit 7
INPUT = "input"  # an option asks for what the hosts cannot give (--master-port, --nproc-per-node): exit 2


@dataclass(frozen=True)
class Problem:
    kind: str  # UNREACHABLE, NOT_READY or INPUT
    text: str


@dataclass
class HostCheck:
    host: hosts.Host
    client: ssh.Client | None = None
    python: str = ""  # the environment's interpreter on the host, once its check has found it
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    gpus: int = 0
    nproc: int = 0
    problems: list[Problem] = field(default_factory=list)
    answers: Sections | None = None  # its check's channel, open until preflight ends (a usable torch)
    importing: bool = False  # an `import torch` runs on that channel
    # The launcher's part of the host's one check command (run first) and its sections' lines and status,
    # kept by Sections as they go by (launcher.check_command, launcher.problems).
    launcher_command: str = ""
    launcher_answers: dict[str, tuple[list[str], int | None]] = field(default_factory=dict)
    # Its interface and address toward its peers (probe.py route, asked on its check's channel).
    route: Route | None = None
    # Work to start once its check's channel is open (the push beside preflight; run.connected): after it,
    # so that where sshd allows one session per connection (MaxSessions 1) the push is the one refused.
    opened: Callable[[HostCheck], None] | None = None


@dataclass
class Preflight:
    checks: list[HostCheck]
    master_addr: str
    master_port: int

    @property
    def clients(self) -> dict[str, ssh.Client]:
        return {c.host.name: c.client for c in self.checks if c.client is not None}

    def close(self) -> None:
        for check in self.checks:
            if check.client is not None:
                check.client.close()


def exit_code(problems: list[Problem]) -> ExitCode:
    """6 when a host could not be reached, else 7 when a host is not ready, else 2 (docs/exit-codes.md)."""
    kinds = {p.kind for p in problems}
    if UNREACHABLE in kinds:
        return ExitCode.HOSTS_UNREACHABLE
    if NOT_READY in kinds:
        return ExitCode.PREFLIGHT_FAILED
    return ExitCode.BAD_INPUT


class PreflightFailed(GpuprovError):
    """Problems on the hosts that keep the job from starting; nothing was started."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = [p.text for p in problems]
        if len(problems) == 1:
            message = f"preflight: {problems[0].text}; nothing was started"
        else:
            message = f"preflight found {len(problems)} problems (listed above); nothing was started"
        super().__init__(message, exit_code(problems))


def run(
    selected: list[hosts.Host],
    master_addr: str,
    master_port: int | None,
    nproc: Nproc,
    environment: Environment | None = None,
    launcher: Launcher | None = None,
    user_env: dict[str, str] | None = None,
    connected: Callable[[HostCheck], None] | None = None,
) -> Preflight:
    """All checks; returns open SSH connections, or raises PreflightFailed with every problem.

    environment: what the ranks run in (default: the default environment, host-python); launcher: how they
    are started (default: torchrun), whose questions go first into each host's one command; user_env: the
    job's --env variables (an NCCL_IB_HCA there is what NCCL will read); connected: work to start on a host's
    connection once its check's channel is open, beside the checks (the push's first part)."""
    if environment is None:
        from gpuprov.launch import environments

        environment = environments.by_name(environments.DEFAULT)
    if launcher is None:
        from gpuprov.launch import launchers

        launcher = launchers.by_name(launchers.DEFAULT)
    env, starter = environment, launcher
    checks = ssh.values(
        ssh.fan_out(selected, lambda host: _check_host(host, env, starter, selected, connected))
    )
    result = Preflight(checks, master_addr, master_port or 0)
    try:
        problems: list[Problem] = []
        if checks[0].answers is not None and checks[0].torch is not None:
            problems += _ib_hca_problems(checks, (user_env or {}).get("NCCL_IB_HCA"))
            port, reach_problems = _master_port_and_reach(checks, master_addr, master_port)
            result.master_port = port
            problems += reach_problems
            problems += _interface_problems(checks)
        ssh.values(ssh.fan_out(checks, env.finish_check))
        problems = [p for c in checks for p in c.problems] + problems
        problems += env.disagreements([c for c in checks if c.torch is not None])
        for check in checks:
            if check.torch is None:
                continue
            resolved = nproc.resolve(check.gpus)
            if resolved is None:
                problems.append(
                    Problem(
                        INPUT,
                        f"{check.host.name} has no GPU, but --nproc-per-node gpu asks for one process per "
                        "GPU; give a number or 'auto'",
                    )
                )
            else:
                check.nproc = resolved
        problems += starter.problems(checks)
        if problems:
            raise PreflightFailed(problems)
    except BaseException:
        result.close()
        raise
    return result


def _check_host(
    host: hosts.Host,
    environment: Environment,
    launcher: Launcher,
    selected: list[hosts.Host],
    connected: Callable[[HostCheck], None] | None = None,
) -> HostCheck:
    check = HostCheck(host, launcher_command=launcher.check_command(host, selected))
    try:
        check.client = connect_ahead.connect(host)  # opened ahead while the launch's modules loaded
    except ssh.Unreachable as exc:
        check.problems.append(Problem(UNREACHABLE, exc.message))
        return check
    except BadInput as exc:  # a known_hosts file that cannot be read
        check.problems.append(Problem(INPUT, exc.message))
        return check
    except GpuprovError as exc:  # the host key is unknown or changed
        check.problems.append(Problem(NOT_READY, exc.message))
        return check
    check.opened = connected  # the environment's check calls it (host_python.read_check)
    try:
        environment.check_host(check)
    except BadInput as exc:  # an inventory value (gpuprov_gpu_count)
        check.problems.append(Problem(INPUT, f"{host.name}: {exc.message}"))
    except GpuprovError as exc:  # the SSH session broke
        check.problems.append(Problem(UNREACHABLE, f"{host.name}: {exc.message}"))
    return check


SECTION = "@@gpuprov "  # marks the sections of the host check's output (host_check_command)
LAUNCHER_SECTION = "launcher-"  # a launcher's sections: Sections keeps them aside for launcher.problems
SMI_COMMAND = (
    "command -v nvidia-smi >/dev/null || exit 100; nvidia-smi --query-gpu=index --format=csv,noheader"
)


class Sections:
    """The host check's output, read section by section as it arrives on its channel."""

    def __init__(
        self, channel: ssh.Channel, kept: dict[str, tuple[list[str], int | None]] | None = None
    ) -> None:
        self.channel = channel
        self.other = []
        self.kept = kept if kept is not None else {}  # the launcher's sections, read as they pass

    def _line(self) -> str | None:
        raw = self.channel.readline()
        return raw.decode(errors="replace").rstrip("\n") if raw else None

    def section(self) -> tuple[str, str]:
        """The next section's name and its first line ('' at the end of the output)."""
        while (line := self._line()) is not None:
            if line.startswith(SECTION + LAUNCHER_SECTION):
                self.kept[line[len(SECTION) :]] = self.until_end()
            elif line.startswith(SECTION):
                return line[len(SECTION) :], ""
        return "", ""

    def until_end(self) -> tuple[list[str], int | None]:
        """The section's lines up to its end marker, and its exit status (None: the output broke off)."""
        lines: list[str] = []
        while (line := self._line()) is not None:
            if line.startswith(SECTION + "end "):
                return lines, int(line.split()[-1])
            lines.append(line)
        return lines, None

    def next_line(self) -> str | None:
        """The section's next line (None at its end marker or at the end of the output)."""
        line = self._line()
        return None if line is None or line.startswith(SECTION + "end ") else line

    def ask(self, command: str, answers: tuple[str, ...]) -> str | None:
        """Send probe.py check a command; its answer: the next line starting with one of answers."""
        if command:
            self.channel.send(command.encode() + b"\n")
        while (line := self.next_line()) is not None:
            if line.startswith("import "):
                self.import_line = line
            elif line.startswith(answers):
                return line
            else:
                self.other.append(line)
        return None

    import_line: str | None = None  # `import JSON`, when it came while waiting for another answer
    other: list[str]  # lines that were no answer (warnings on stderr, a traceback)

    def last_other(self) -> str:
        return (self.other or ["no answer"])[-1].strip()


def gpu_count(smi: ssh.Result) -> int:
    """The GPUs in nvidia-smi's answer (SMI_COMMAND, its stderr with its stdout)."""
    # No nvidia-smi (100), or the driver finds no GPU: the messages of tests/recorded/nvidia-smi/error-no-*.
    if smi.rc == 100 or re.search(r"No devices were found|No supported GPUs were found", smi.stdout):
        return 0
    if smi.rc != 0:  # e.g. "Driver/library version mismatch" (exit 18): the host's GPUs are not usable yet
        first = (smi.stdout.strip() or smi.stderr.strip() or f"exit status {smi.rc}").splitlines()[0]
        raise GpuprovError(
            f"nvidia-smi failed (exit {smi.rc}): {first}; reboot a host whose driver was just upgraded, "
            "or re-run `gpuprov bootstrap` on it"
        )
    return len([line for line in smi.stdout.splitlines() if line.strip()])


def _ask_route(check: HostCheck, toward: str) -> None:
    """The host's interface and address toward a peer (probe.py route) into check.route; left None when
    the host cannot say (its check's other answers report a broken session)."""
    from gpuprov.launch import interfaces

    assert check.answers is not None
    try:
        line = check.answers.ask(f"route {toward}", (interfaces.ROUTE_ANSWER,))
    except ssh.SessionLost:
        return
    check.route = interfaces.parse(line or "", toward)


def _interface_problems(checks: list[HostCheck]) -> list[Problem]:
    from gpuprov.launch import interfaces

    return [p for c in checks for p in interfaces.problems(c.host, c.route, len(checks) > 1)]


def _ib_hca_problems(checks: list[HostCheck], given: str | None) -> list[Problem]:
    from gpuprov.launch import ib_hca

    return ib_hca.problems(checks, given)


def _master_listens(master: HostCheck, given_port: int | None, workers: int) -> tuple[int, list[Problem]]:
    """The master's rendezvous port, listening for `workers` test connections (0 and why not)."""
    assert master.answers is not None
    first, count = (given_port, 1) if given_port else (DEFAULT_MASTER_PORT, MASTER_PORT_SEARCH)
    listen = f"listen {first} {count} {workers} {REACH_TIMEOUT_S + 2}"
    try:
        head = master.answers.ask(listen, ("port ", "busy")) or ""
    except ssh.SessionLost as exc:
        return 0, [
            Problem(
                UNREACHABLE, f"{master.host.name}: SSH failed during the port check ({ssh.reason(exc.cause)})"
            )
        ]
    if not head:
        return 0, [
            Problem(NOT_READY, f"{master.host.name}: the port check failed: {master.answers.last_other()}")
        ]
    if head.startswith("port "):
        return int(head.split()[1]), []
    if given_port:
        why = (
            f"master port {given_port} is in use on {master.host.name}; choose another "
            "--master-port or leave it out to let gpuprov pick a free one"
        )
        return 0, [Problem(INPUT, why)]
    why = f"no free port in {first}-{first + count - 1} on the master {master.host.name}; give --master-port"
    return 0, [Problem(NOT_READY, why)]


def _master_port_and_reach(
    checks: list[HostCheck], master_addr: str, given_port: int | None
) -> tuple[int, list[Problem]]:
    """On the channels of the hosts' checks: the master listens, every other host connects to it."""
    master = checks[0]
    assert master.answers is not None
    workers = [c for c in checks[1:] if c.answers is not None and c.torch is not None]
    if workers:
        # The interface holding the address its peers reach it on (gpuprov_master_addr may name a cluster
        # network apart from SSH's); where that address is not its own (NAT), toward the first worker.
        _ask_route(master, master_addr)
        if master.route is None or master.route.source != master_addr:
            _ask_route(master, workers[0].host.address)
    port, problems = _master_listens(master, given_port, len(workers))
    if problems:
        return 0, problems
    listening = {master.host.name: (master_addr, {"rendezvous": port})}
    tried = porttest.probes([c.host.name for c in workers], listening)
    by_source = {p.source: p for p in tried}
    answers: dict[porttest.Probe, str] = {}
    lock = threading.Lock()

    def reach(check: HostCheck) -> None:
        assert check.answers is not None
        probe = by_source[check.host.name]
        command = f"connect {master_addr} {port} {probe.token} {REACH_TIMEOUT_S}"
        try:
            answer = check.answers.ask(command, ("ok", "error ")) or f"error {check.answers.last_other()}"
        except ssh.SessionLost as exc:
            answer = f"error SSH failed ({ssh.reason(exc.cause)})"
        with lock:
            answers[probe] = answer.removeprefix("error ")
        if answer == "ok":
            _ask_route(check, master_addr)

    ssh.values(ssh.fan_out(workers, reach))
    received = set()
    try:
        while (line := master.answers.ask("", ("got ", "listened"))) not in (None, "listened"):
            received.add(line.split(" ", 1)[1])
    except ssh.SessionLost:
        pass  # the hosts whose token did not arrive are named below
    return port, [
        Problem(
            NOT_READY,
            f"{p.source} cannot reach the master {master.host.name} at {master_addr}:{port} ({why}); "
            f"check the address (ansible_host or gpuprov_master_addr of {master.host.name}) and firewalls",
        )
        for p, why in porttest.failures(tried, answers, received).items()
    ]
