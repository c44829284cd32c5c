"""Checks before Ansible touches any host, on all hosts at once; every problem is reported, not the first.

Per host, over one SSH session with host key checking on: the host answers and knows our key, become
(sudo) works without a prompt or with the inventory's become password, python3 is there for Ansible, and
the OS is one the roles support, and its NVIDIA GPUs (PCI device ids from sysfs, read-only). Then the
compatibility lock (`gpu_stack`) is checked against gpuprov's table, and, when it fits, against what NVIDIA's
repository for each host's OS carries (an "os" problem of that host) and what the host's GPU generation can
run (a "gpu" problem: gpuprov.gpu_generations; a GPU the table does not know is a warning only).
Nothing on a host is changed: `gpuprov bootstrap` runs it before Ansible starts, `gpuprov lock check` alone.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuprov import gpu_generations, hosts, platforms, ssh
from gpuprov.errors import BadInput, ExitCode

SUPPORTED_TEXT = platforms.describe()  # gpuprov's table, which the roles check hosts against too
SSH_TIMEOUT_S = 10
COMMAND_TIMEOUT_S = 20
# A host that hangs on every step within its SSH timeouts (connect, 5 commands) is reported, the others not
# held up by it.
HOST_TIMEOUT_S = 3 * SSH_TIMEOUT_S + 5 * COMMAND_TIMEOUT_S + 30


@dataclass(frozen=True)
class Problem:
    host: str  # a host name, or "(lock)" for the compatibility lock
    check: str  # ssh | host key | become | python | os | gpu | python_env | lock
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"host": self.host, "check": self.check, "message": self.message}


@dataclass(frozen=True)
class HostReport:
    host: str
    os: str  # "Debian 12", or "" when unknown
    problems: tuple[Problem, ...]
    os_release: tuple[str, str] = ("", "")  # /etc/os-release's ID and VERSION_ID: ("ubuntu", "24.04")
    gpus: tuple[gpu_generations.PciGpu, ...] = ()  # the NVIDIA GPUs on its PCI bus
    warnings: tuple[str, ...] = ()  # shown, never a failure (a GPU the table does not know)
    extra: Any = None  # what run()'s `also` returned for the host (bootstrap's drift probe)


# A caller's own work on a host that passed, over the preflight's open connection (no second SSH handshake).
Also = Callable[[hosts.Host, "ssh.Client"], Any]


def run(
    inventory: hosts.Inventory, extravars: Mapping[str, Any], also: Also | None = None
) -> tuple[list[HostReport], list[Problem]]:
    """Check every host in parallel, then the lock; returns per-host reports and the lock's problems."""
    outcomes = ssh.fan_out(
        inventory.hosts,
        lambda host: check_host(host, extravars, also),
        timeout=HOST_TIMEOUT_S,
    )
    reports = [_timed_out(o.item) if isinstance(o.error, ssh.TimedOut) else o.get() for o in outcomes]
    lock_problems = check_lock(inventory, extravars)
    if not lock_problems:  # the lock fits the table: now, does each host's OS repository carry its CUDA?
        stacks = {
            host.name: extravars.get("gpu_stack", host.vars.get("gpu_stack")) for host in inventory.hosts
        }
        reports = [check_os_repository(report, stacks[report.host]) for report in reports]
        if any(report.gpus for report in reports):
            reports = check_gpu_generations(reports, stacks)
    reports = [check_python(report, inventory, extravars) for report in reports]
    return reports, lock_problems


def exit_code(reports: list[HostReport], lock_problems: list[Problem]) -> ExitCode:
    problems = [p for r in reports for p in r.problems]
    if any(p.check == "ssh" for p in problems):
        return ExitCode.HOSTS_UNREACHABLE
    if problems:
        return ExitCode.PREFLIGHT_FAILED
    if lock_problems:
        return ExitCode.BAD_INPUT
    return ExitCode.OK


def summary(reports: list[HostReport], lock_problems: list[Problem]) -> dict[str, Any]:
    """The preflight as the run's summary.json and `gpuprov lock check --json` record it."""
    return {
        "hosts": {
            r.host: {
                "os": r.os,
                "gpus": [f"10de:{g.device}" for g in r.gpus],
                "problems": [p.as_dict() for p in r.problems],
                "warnings": list(r.warnings),
            }
            for r in reports
        },
        "lock_problems": [p.as_dict() for p in lock_problems],
    }


def _timed_out(host: hosts.Host) -> HostReport:
    message = f"the checks did not finish within {HOST_TIMEOUT_S:g} s; is the host overloaded?"
    return HostReport(host.name, "", (Problem(host.name, "ssh", message),))


def check_host(host: hosts.Host, extravars: Mapping[str, Any], also: Also | None = None) -> HostReport:
    try:
        client = ssh.connect(host, timeout=SSH_TIMEOUT_S)
    except ssh.HostKeyProblem as exc:
        return HostReport(host.name, "", (Problem(host.name, "host key", ssh.without_label(exc, host)),))
    except (ssh.Unreachable, BadInput) as exc:
        return HostReport(host.name, "", (Problem(host.name, "ssh", ssh.without_label(exc, host)),))
    problems: list[Problem] = []
    try:
        os_release = ssh.run(client, "cat /etc/os-release", COMMAND_TIMEOUT_S)
        os_text = os_release.stdout if os_release.rc == 0 else ""
        os_name, os_problem = check_os(os_text)
        fields = parse_os_release(os_text)
        os_ids = (fields.get("ID", "").lower(), fields.get("VERSION_ID", ""))
        if os_problem:
            problems.append(Problem(host.name, "os", os_problem))
        python = ssh.run(client, "command -v python3", COMMAND_TIMEOUT_S)
        interpreter = str(host.vars.get("ansible_python_interpreter") or "")
        if interpreter and "{{" not in interpreter:
            python = ssh.run(
                client,
                f"test -x {shlex.quote(interpreter)} && echo {shlex.quote(interpreter)}",
                COMMAND_TIMEOUT_S,
            )
        if python.rc != 0 or not python.stdout.strip():
            wanted = interpreter or "python3"
            problems.append(
                Problem(host.name, "python", f"{wanted} not found; Ansible needs Python 3 on the host")
            )
        become = check_become(client, host, extravars)
        if become:
            problems.append(Problem(host.name, "become", become))
        gpus = read_gpus(client)
        extra = also(host, client) if also is not None and not problems else None
    except ssh.SessionLost as exc:
        problems.append(
            Problem(host.name, "ssh", f"the SSH session broke: {exc.cause or type(exc.cause).__name__}")
        )
        os_name, os_ids, gpus, extra = "", ("", ""), (), None
    finally:
        client.close()
    return HostReport(host.name, os_name, tuple(problems), os_ids, gpus, extra=extra)


def read_gpus(client: ssh.Client) -> tuple[gpu_generations.PciGpu, ...]:
    """The host's NVIDIA GPUs from sysfs (nothing installed or loaded is needed); () when it shows none."""
    script = gpu_generations.read_script()
    listing = ssh.run(client, f"sh -c {shlex.quote(script)}", COMMAND_TIMEOUT_S)
    return tuple(gpu_generations.parse_listing(listing.stdout)) if listing.rc == 0 else ()


def check_gpu_generations(reports: list[HostReport], stacks: Mapping[str, Any]) -> list[HostReport]:
    """Each report plus a "gpu" problem when the host's GPUs cannot run its lock, and the table's warnings."""
    from gpuprov import lock

    try:
        tables = gpu_generations.load_tables()
        cudas = [str(row["version"]) for row in lock.load_table().get("cuda", [])]
    except (OSError, ValueError) as exc:
        unread = f"gpuprov's GPU tables cannot be read: {exc}"
        return [replace(r, problems=(*r.problems, Problem(r.host, "gpu", unread))) for r in reports]
    checked = []
    for report in reports:
        stack = stacks[report.host]
        if not report.gpus or not isinstance(stack, Mapping):
            checked.append(report)
            continue
        line, warnings = gpu_generations.host_problems(report.gpus, stack, tables, cudas)
        extra = (Problem(report.host, "gpu", line),) if line else ()
        checked.append(
            replace(report, problems=report.problems + extra, warnings=report.warnings + tuple(warnings))
        )
    return checked


def check_os_repository(report: HostReport, stack: Any) -> HostReport:
    """The report plus an "os" problem when NVIDIA's repository for the host's OS lacks the locked CUDA."""
    os_id, version = report.os_release
    if not os_id or any(p.check == "os" for p in report.problems):
        return report
    from gpuprov import lock

    try:
        messages = lock.os_problems(stack, os_id, version)
    except (OSError, ValueError):  # an unreadable table is already reported by check_lock
        return report
    extra = tuple(Problem(report.host, "os", f"{report.os}: {message}") for message in messages)
    return replace(report, problems=report.problems + extra)


def check_python(report: HostReport, inventory: hosts.Inventory, extravars: Mapping[str, Any]) -> HostReport:
    """The report plus a "python_env" problem when the role would find no Python the locked PyTorch has wheels
    for on the host's OS (gpuprov.python_fit, the role's own choice)."""
    os_id, version = report.os_release
    platform = platforms.find(os_id, version) if os_id else None
    host = next((h for h in inventory.hosts if h.name == report.host), None)
    if platform is None or host is None or any(p.check == "os" for p in report.problems):
        return report
    from gpuprov import python_fit

    settings = {**host.vars, **extravars}
    try:
        message = python_fit.host_problem(host.name, (os_id, version), platform.distribution, settings)
    except (OSError, ValueError, KeyError, TypeError):  # an unreadable table: the role reports it
        return report
    if not message:
        return report
    return replace(report, problems=(*report.problems, Problem(report.host, "python_env", message)))


def parse_os_release(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            try:
                words = shlex.split(value)
            except ValueError:
                words = [value.strip()]
            fields[key.strip()] = words[0] if words else ""
    return fields


def check_os(os_release: str) -> tuple[str, str | None]:
    """('Debian 12', None) for a supported OS; else (name, the problem)."""
    fields = parse_os_release(os_release)
    os_id = fields.get("ID", "").lower()
    version = fields.get("VERSION_ID", "")
    name = fields.get("NAME", os_id or "unknown OS")
    shown = f"{name} {version}".strip()
    if not os_id:
        return "", f"/etc/os-release is missing or has no ID; supported: {SUPPORTED_TEXT}"
    if platforms.find(os_id, version) is None:
        return shown, f"{shown} is not supported; supported: {SUPPORTED_TEXT}"
    return shown, None


def sudo_command(
    host: hosts.Host, extravars: Mapping[str, Any], user: str, command: str
) -> tuple[str, bytes | None]:
    """`command` under sudo as `user`, and its stdin: the become password (-S) when the run or inventory has
    one, else nothing (-n: sudo fails rather than ask)."""
    password = extravars.get("ansible_become_password") or host.become_password
    if password:
        return f"sudo -S -p '' -u {shlex.quote(user)} {command}", f"{password}\n".encode()
    return f"sudo -n -u {shlex.quote(user)} {command}", None


def check_become(client: ssh.Client, host: hosts.Host, extravars: Mapping[str, Any]) -> str | None:
    """None when the host's become (sudo) works, else what is wrong."""
    method = str(extravars.get("ansible_become_method") or host.become_method)
    if method != "sudo":
        return None  # only sudo is checked; other methods are left to Ansible
    user = str(extravars.get("ansible_become_user") or host.become_user)
    line, stdin = sudo_command(host, extravars, user, "true")
    result = ssh.run(client, line, COMMAND_TIMEOUT_S, stdin=stdin)
    if stdin is not None:
        if result.rc != 0:
            return (
                f"sudo -u {user} as {host.user} failed with the inventory's become password "
                f"({_last_line(result.stderr)}); check ansible_become_password and the sudoers entry"
            )
        return None
    if result.rc != 0:
        return (
            f"sudo -u {user} as {host.user} needs a password or is not allowed "
            f"({_last_line(result.stderr)}); "
            "allow passwordless sudo for that user or set ansible_become_password (in a vault)"
        )
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def check_lock(inventory: hosts.Inventory, extravars: Mapping[str, Any]) -> list[Problem]:
    """The `gpu_stack` each host will get (extra vars win over the inventory) checked against the table."""
    try:
        from gpuprov import lock
    except ImportError:  # the lock module is not part of this build
        return []
    stacks: dict[str, tuple[Any, list[str]]] = {}
    unset: list[str] = []
    for host in inventory.hosts:
        stack = extravars.get("gpu_stack", host.vars.get("gpu_stack"))
        if stack is None:
            unset.append(host.name)
            continue
        key = repr(stack)
        stacks.setdefault(key, (stack, []))[1].append(host.name)
    problems: list[Problem] = []
    if unset:
        where = "all hosts" if len(unset) == len(inventory.hosts) else ", ".join(unset)
        problems.append(
            Problem(
                f"(lock: {where})",
                "lock",
                "gpu_stack is not set; copy inventory/sample/group_vars/all/gpu_stack.yml into the "
                "inventory's group_vars/all/ or pass it with -e @FILE",
            )
        )
    for stack, names in stacks.values():
        where = "all hosts" if len(names) == len(inventory.hosts) else ", ".join(names)
        try:
            messages = lock.check(stack)
        except (OSError, ValueError) as exc:
            messages = [f"the compatibility table cannot be read: {exc}"]
        problems += [Problem(f"(lock: {where})", "lock", message) for message in messages]
    return problems
