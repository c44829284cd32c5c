"""Preflight: every check that can fail before any rank starts, on all hosts at once, all problems together.

Per host: SSH (host key checked), the Python env (from the python_env role's fact file), `import torch`,
torch / CUDA / NCCL versions, GPU count. Across hosts: versions agree, the master port is free on the
master, and every other host can open a TCP connection to the master's address and port. What runs on the
hosts in Python is probe.py. Problems are counted by kind, and the worst decides the exit code (6, 7, 2).

Round trips: one command per host (host_check_command). Its channel stays open to the end of preflight:
on it the master then binds the port and every other host connects to it (they need the port the master
found free), while a first `import torch` runs. The SSH connections stay open for the push and the start.
"""

from __future__ import annotations

import json
import re
import shlex
import threading
from collections import Counter
from dataclasses import dataclass, field

from gpuprov import hosts, onhost, porttest, ssh
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import remote
from gpuprov.launch.options import DEFAULT_MASTER_PORT, MASTER_PORT_SEARCH, Nproc

FACT_FILE = "/etc/ansible/facts.d/gpuprov_python_env.fact"
DEFAULT_PYTHON = "/opt/gpuprov/envs/train/bin/python"
REACH_TIMEOUT_S = 5.0
IMPORT_TIMEOUT_S = 120.0


def _probe_code() -> str:
    return onhost.program("probe.py")  # its programs for the hosts, stdlib only


def probe_command(python: str, *args: str) -> str:
    """Run a probe.py command on a host with the env's python; the file's text goes as `python -c`."""
    return remote.python_command(python, _probe_code(), *args)


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
    python: str = DEFAULT_PYTHON
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    gpus: int = 0
    nproc: int = 0
    problems: list[Problem] = field(default_factory=list)
    answers: _Sections | None = None  # its check's channel, open until preflight ends (a usable torch)
    importing: bool = False  # an `import torch` runs on that channel


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


def run(selected: list[hosts.Host], master_addr: str, master_port: int | None, nproc: Nproc) -> Preflight:
    """All checks; returns open SSH connections, or raises PreflightFailed with every problem."""
    checks = ssh.values(ssh.fan_out(selected, _check_host))
    result = Preflight(checks, master_addr, master_port or 0)
    try:
        problems: list[Problem] = []
        if checks[0].answers is not None and checks[0].torch is not None:
            port, reach_problems = _master_port_and_reach(checks, master_addr, master_port)
            result.master_port = port
            problems += reach_problems
        ssh.values(ssh.fan_out(checks, _finish_import))
        problems = [p for c in checks for p in c.problems] + problems
        problems += _versions_agree([c for c in checks if c.torch is not None])
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
        if problems:
            raise PreflightFailed(problems)
    except BaseException:
        result.close()
        raise
    return result


def _check_host(host: hosts.Host) -> HostCheck:
    check = HostCheck(host)
    try:
        check.client = ssh.connect(host)
    except ssh.Unreachable as exc:
        check.problems.append(Problem(UNREACHABLE, exc.message))
        return check
    except BadInput as exc:  # a known_hosts file that cannot be read
        check.problems.append(Problem(INPUT, exc.message))
        return check
    except GpuprovError as exc:  # the host key is unknown or changed
        check.problems.append(Problem(NOT_READY, exc.message))
        return check
    try:
        _probe(check)
    except BadInput as exc:  # an inventory value (gpuprov_gpu_count)
        check.problems.append(Problem(INPUT, f"{host.name}: {exc.message}"))
    except GpuprovError as exc:  # the SSH session broke
        check.problems.append(Problem(UNREACHABLE, f"{host.name}: {exc.message}"))
    return check


SECTION = "@@gpuprov "  # marks the sections of the host check's output (host_check_command)
SMI_COMMAND = (
    "command -v nvidia-smi >/dev/null || exit 100; nvidia-smi --query-gpu=index --format=csv,noheader"
)
_FACT_PYTHON_SED = r's/^[[:space:]]*"python":[[:space:]]*"\([^"\\]*\)".*$/\1/p'


def host_check_command(given_python: str | None, count_gpus: bool) -> str:
    """One shell command for every check of one host, so that a host costs one round trip.

    Sections, each `@@gpuprov NAME` ... `@@gpuprov end RC`: fact (the python_env role's fact file), smi
    (nvidia-smi's GPU list, when the inventory does not give gpuprov_gpu_count), then python (the env's
    python it used: gpuprov_python, else the one the fact file names, else the default) and check
    (probe.py check with that python: look's line at once, import's later when it is needed).
    """
    q = shlex.quote
    lines = [
        f"echo '{SECTION}fact'; cat {q(FACT_FILE)} 2>&1; r=$?; echo; echo \"{SECTION}end $r\"",
    ]
    if count_gpus:
        lines.append(f"echo '{SECTION}smi'; ( {SMI_COMMAND} ) 2>&1; r=$?; echo \"{SECTION}end $r\"")
    if given_python:
        lines.append(f"py={q(given_python)}")
    else:
        lines.append(
            f"py=$(sed -n {q(_FACT_PYTHON_SED)} {q(FACT_FILE)} 2>/dev/null | head -n 1); "
            f'[ -n "$py" ] || py={q(DEFAULT_PYTHON)}'
        )
    lines.append(f'echo "{SECTION}python $py"')
    look = remote.python_command("PYTHON", _probe_code(), "check").replace("PYTHON", '"$py"', 1)
    lines.append(f"echo '{SECTION}check'; {look} 2>&1; r=$?; echo \"{SECTION}end $r\"")
    return "\n".join(lines) + "\n"


class _Sections:
    """The host check's output, read section by section as it arrives on its channel."""

    def __init__(self, channel: ssh.Channel) -> None:
        self.channel = channel
        self.other = []

    def _line(self) -> str | None:
        raw = self.channel.readline()
        return raw.decode(errors="replace").rstrip("\n") if raw else None

    def section(self) -> tuple[str, str]:
        """The next section's name and its first line ('' at the end of the output)."""
        while (line := self._line()) is not None:
            if line.startswith(SECTION):
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


def _probe(check: HostCheck) -> None:
    assert check.client is not None
    host = check.host
    given = host.vars.get("gpuprov_gpu_count")
    if given is not None:
        try:
            check.gpus = int(given)
        except (TypeError, ValueError):
            raise BadInput(f"gpuprov_gpu_count {given!r} is not a number; fix the inventory") from None
    given_python = host.vars.get("gpuprov_python")
    command = host_check_command(str(given_python) if given_python else None, count_gpus=given is None)
    channel = ssh.open_channel(check.client, command, read_timeout=60)
    try:
        answers = _Sections(channel)
        if not _read_checks(check, answers, given is None):
            channel.close()
            return
    except ssh.SessionLost as exc:
        channel.close()
        cause = exc.cause
        raise GpuprovError(f"SSH failed during the checks ({type(cause).__name__}: {cause})") from None
    except BaseException:
        channel.close()
        raise


def _no_env(check: HostCheck, text: str, fact_rc: int | None) -> Problem:
    """Why the env's python gave no answer (text: what it printed instead)."""
    name = check.host.name
    if "No such file" in text or "not found" in text:
        where = FACT_FILE if fact_rc == 0 else f"no {FACT_FILE}"
        return Problem(
            NOT_READY,
            f"{name}: no Python env at {check.python} ({where}); run `gpuprov bootstrap` on it "
            "first (or set gpuprov_python for the host)",
        )
    last = (text.strip().splitlines() or ["no answer"])[-1].strip()
    return Problem(NOT_READY, f"{name}: {check.python} failed: {last}")


def _look_again(check: HostCheck) -> _Sections:
    """probe.py check on a channel of its own, with check.python."""
    assert check.client is not None
    command = probe_command(check.python, "check") + " 2>&1"
    try:
        return _Sections(ssh.open_channel(check.client, command, read_timeout=60))
    except ssh.SessionLost as exc:  # not the reading's "SSH failed during the checks": its own message
        raise GpuprovError(exc.message) from None


def _read_checks(check: HostCheck, answers: _Sections, count_gpus: bool) -> bool:
    """Read the host check's sections into check; True when its import is still running on the channel."""
    host = check.host
    name, _ = answers.section()
    fact_lines, fact_rc = answers.until_end()
    fact_python = fact_nccl = None
    if fact_rc == 0:
        try:
            recorded = json.loads("\n".join(fact_lines))
            fact_python, fact_nccl = recorded.get("python"), recorded.get("nccl_version")
        except (ValueError, AttributeError):
            check.problems.append(
                Problem(NOT_READY, f"{host.name}: {FACT_FILE} is not valid JSON; re-run `gpuprov bootstrap`")
            )
            return False
    smi: ssh.Result | None = None
    if count_gpus:
        answers.section()
        smi_lines, smi_rc = answers.until_end()
        smi = ssh.Result(smi_rc if smi_rc is not None else 255, "\n".join(smi_lines) + "\n", "")
    name, _ = answers.section()
    used = name.removeprefix("python ")
    check.python = str(host.vars.get("gpuprov_python") or fact_python or DEFAULT_PYTHON)
    answers.section()
    first = answers.next_line()
    if used != check.python:  # the shell read the fact file differently: look again with the right one
        answers.channel.close()
        answers = _look_again(check)
        first = answers.next_line()
    output = [first] if first is not None else []
    info = None
    while first is not None:
        try:
            info = json.loads(first)
            break
        except ValueError:
            first = answers.next_line()
            if first is not None:
                output.append(first)
    if info is None:
        check.problems.append(_no_env(check, "\n".join(output), fact_rc))
        return False
    if "error" in info:
        check.problems.append(
            Problem(NOT_READY, f"{host.name}: the env {check.python} has no usable torch ({info['error']})")
        )
        return False
    check.torch, check.cuda = info["torch"], info.get("cuda")
    check.nccl = info.get("nccl") or fact_nccl
    if smi is not None:
        check.gpus = gpu_count(smi)
    check.answers = answers
    check.importing = not info.get("imported_before")
    return True


def _finish_import(check: HostCheck) -> None:
    """End the host's check: wait for its `import torch`, whose versions replace those read from files."""
    answers = check.answers
    if answers is None:
        return
    check.answers = None
    name = check.host.name
    try:
        answers.channel.shutdown_write()  # end of input: probe.py ends once its import has
        if not check.importing:
            return
        answers.channel.settimeout(IMPORT_TIMEOUT_S)
        if answers.import_line is None:
            answers.ask("", ())  # to the end of its output: the import's line is kept on the way
        info = json.loads((answers.import_line or "").removeprefix("import "))
    except (ssh.SessionLost, ValueError):
        check.problems.append(
            Problem(
                NOT_READY,
                f"{name}: `import torch` with {check.python} did not report ({answers.last_other()})",
            )
        )
        check.torch = None
        return
    finally:
        answers.channel.close()
    if "error" in info:
        check.problems.append(
            Problem(NOT_READY, f"{name}: the env {check.python} cannot import torch ({info['error']})")
        )
        check.torch = None
        return
    check.torch, check.cuda = info["torch"], info.get("cuda")
    check.nccl = info.get("nccl") or check.nccl


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


def _versions_agree(checks: list[HostCheck]) -> list[Problem]:
    problems = []
    for label, attr in (("torch", "torch"), ("CUDA (torch.version.cuda)", "cuda"), ("NCCL", "nccl")):
        values = Counter(str(getattr(c, attr)) for c in checks)
        if len(values) <= 1:
            continue
        common, _ = values.most_common(1)[0]
        odd = [f"{c.host.name} has {getattr(c, attr)}" for c in checks if str(getattr(c, attr)) != common]
        problems.append(
            Problem(
                NOT_READY,
                f"{label} versions differ: {', '.join(odd)}, the other hosts {common}; "
                "re-run `gpuprov bootstrap` so every host has the same env",
            )
        )
    return problems


def _master_listens(master: HostCheck, given_port: int | None, workers: int) -> tuple[int, list[Problem]]:
    """The master's rendezvous port, listening for `workers` test connections (0 and why not)."""
    assert master.answers is not None
    first, count = (given_port, 1) if given_port else (DEFAULT_MASTER_PORT, MASTER_PORT_SEARCH)
    listen = f"listen {first} {count} {workers} {REACH_TIMEOUT_S + 2}"
    try:
        head = master.answers.ask(listen, ("port ", "busy")) or ""
    except ssh.SessionLost as exc:
        return 0, [
            Problem(UNREACHABLE, f"{master.host.name}: SSH failed during the port check ({exc.cause})")
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
            answer = f"error SSH failed ({exc.cause})"
        with lock:
            answers[probe] = answer.removeprefix("error ")

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
