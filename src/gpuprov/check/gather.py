"""Run hostprobe.py's `collect` on every host at once: one SSH connection and one command per host.

Host key checking stays on (gpuprov.ssh.connect). A host that cannot be reached, or whose probe fails or
times out, comes back with `error` set: every check of that host then could not run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gpuprov import hosts, onhost, ssh
from gpuprov.check import parsers
from gpuprov.errors import GpuprovError
from gpuprov.onhost import hostprobe, python_command

# The host program keeps within its own budget (a cold `import torch`, a 30 s soak before the matmul, every
# nvidia-smi at its limit) and reports what ran out; SSH waits that long and a margin for its own start.
PROBE_TIMEOUT_S = hostprobe.HOST_BUDGET_S + 30.0


def probe_code() -> str:
    return onhost.program("hostprobe.py")


def system_python(host: hosts.Host) -> str:
    """The interpreter Ansible uses on the host (the probe needs only the standard library)."""
    return str(host.vars.get("ansible_python_interpreter") or "python3")


@dataclass
class Gathered:
    host: hosts.Host
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # why nothing could be gathered
    unreachable: bool = True  # the error is SSH's (else the host program's)
    client: ssh.Client | None = None


def request(host: hosts.Host, sysctl_keys: list[str]) -> dict[str, Any]:
    v = host.vars
    return {
        "python": v.get("gpuprov_python") or "",
        "sysctl_keys": sysctl_keys,
        "nccl_conf": v.get("network_tuning_nccl_conf_file") or "/etc/nccl.conf",
        "cuda_home": v.get("cuda_home_link") or "/usr/local/cuda",
        "ecc_fields": list(parsers.ECC_FIELDS),
        # hostprobe runs these with the env's python (`python -c`): their text goes with the request.
        "programs": {name: onhost.text(f"{name}.py") for name in ("env_probe", "matmul_probe")},
    }


def gather_one(host: hosts.Host, sysctl_keys: list[str]) -> Gathered:
    found = Gathered(host)
    try:
        found.client = ssh.connect(host)
        command = python_command(system_python(host), probe_code(), "collect")
        stdin = json.dumps(request(host, sysctl_keys)).encode()
        result = ssh.run(found.client, command, timeout=PROBE_TIMEOUT_S, stdin=stdin)
    except GpuprovError as exc:
        found.error = ssh.without_label(exc, host)
        return found
    found.unreachable = False
    if result.rc != 0:
        found.error = f"the check program failed on the host: {result.last_line}"
        return found
    try:
        found.data = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        found.error = f"the check program printed no result: {result.last_line}"
    return found


def gather(selected: list[hosts.Host], sysctl_keys: list[str]) -> list[Gathered]:
    outcomes = ssh.fan_out(selected, lambda h: gather_one(h, sysctl_keys), timeout=PROBE_TIMEOUT_S + 30)
    gathered = []
    for outcome in outcomes:
        if outcome.error is not None:
            if isinstance(outcome.error, KeyboardInterrupt):
                raise outcome.error
            gathered.append(Gathered(outcome.item, error=f"no answer: {ssh.reason(outcome.error)}"))
        else:
            gathered.append(outcome.get())
    return gathered
