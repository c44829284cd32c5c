"""Run gpuprov.onhost.managed_state on a host as root, over an SSH connection already open (the preflight's).

One command per host: `sudo python3 -c <the probe>`; its JSON answer, or why there is none. Any doubt is an
error here (a sudo that asks, an answer that is not the probe's JSON), which the drift check turns into a full
run of that host.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from gpuprov import host_preflight, hosts, onhost, ssh
from gpuprov.errors import GpuprovError

PROBE_TIMEOUT_S = 120  # every tool in the probe has 60 s; dpkg-query and systemctl answer in well under 1 s


def interpreter(host: hosts.Host) -> str:
    """The host's Python for the probe: the inventory's, unless it is Ansible's discovery or a template."""
    given = str(host.vars.get("ansible_python_interpreter") or "")
    return given if given and not given.startswith("auto") and "{{" not in given else "python3"


def command(host: hosts.Host, extravars: Mapping[str, Any]) -> tuple[str, bytes | None]:
    """The shell command and its stdin (the become password, when there is one)."""
    program = onhost.python_command(interpreter(host), onhost.text("managed_state.py"))
    return host_preflight.sudo_command(host, extravars, "root", program)


def run(client: ssh.Client, host: hosts.Host, extravars: Mapping[str, Any]) -> dict[str, Any] | str:
    """The probe's report, or a line saying why there is none."""
    method = str(extravars.get("ansible_become_method") or host.become_method)
    if method != "sudo":
        return f"the probe runs with sudo; this host's become method is {shlex.quote(method)}"
    line, stdin = command(host, extravars)
    try:
        result = ssh.run(client, line, PROBE_TIMEOUT_S, stdin=stdin)
    except GpuprovError as exc:
        return f"the probe did not finish: {ssh.without_label(exc, host)}"
    if result.rc != 0:
        return f"the probe failed (exit {result.rc}): {result.last_line[:300]}"
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "the probe printed no report"
    if not isinstance(report, dict) or not isinstance(report.get("roles"), dict):
        return "the probe's report has no roles"
    return report


def run_alone(host: hosts.Host, extravars: Mapping[str, Any]) -> dict[str, Any] | str:
    """The probe over a new connection (after Ansible ran: the preflight's connections are closed)."""
    try:
        client = ssh.connect(host)
    except GpuprovError as exc:
        return f"no SSH connection: {ssh.without_label(exc, host)}"
    try:
        return run(client, host, extravars)
    finally:
        client.close()
