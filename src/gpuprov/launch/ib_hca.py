"""NCCL_IB_HCA checked against the RDMA devices each host has, before a multi-host job starts.

NCCL_IB_HCA (NCCL's environment variable docs) is a comma list of device[:port] entries; a leading `^`
excludes what the list matches, and a leading `=` (after any `^`) makes every entry an exact name, else each
is a prefix: `mlx5` picks every mlx5 device, storage and management ports included. Both marks apply to the
whole list (nccl src/transport/net_ib.cc, ncclIbInit: searchNot, then searchExact, then parseStringList).
A list that picks no device leaves NCCL with no IB device: it says `NET/IB : No device found` and runs
over TCP sockets, many times slower, with no error. Each host says (probe.py rdma) which value NCCL would
read there (its environment, ~/.nccl.conf or NCCL_CONF_FILE, /etc/nccl.conf) and what /sys/class/infiniband
holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpuprov import ssh
from gpuprov.launch.preflight import NOT_READY, HostCheck, Problem

RDMA_ANSWER = "rdma "  # probe.py rdma's line: `rdma JSON`


@dataclass(frozen=True)
class Selection:
    exclude: bool
    exact: bool
    entries: tuple[tuple[str, int | None], ...]  # (device name or prefix, port or None: any port)


def parse(value: str) -> Selection:
    exclude = value.startswith("^")
    rest = value[1:] if exclude else value
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    entries = []
    for entry in (e.strip() for e in rest.split(",")):
        if entry:
            name, _, port = entry.partition(":")
            entries.append((name, int(port) if port.isdigit() else None))
    return Selection(exclude, exact, tuple(entries))


def _matches(selection: Selection, entry: tuple[str, int | None], device: str, ports: list[int]) -> bool:
    name, port = entry
    named = device == name if selection.exact else device.startswith(name)
    return named and (port is None or port in ports)


def picked(selection: Selection, devices: dict[str, list[int]]) -> list[str]:
    """The devices NCCL would use under this selection."""
    hits = {d for d, ports in devices.items() for e in selection.entries if _matches(selection, e, d, ports)}
    return sorted(set(devices) - hits if selection.exclude else hits)


def problem_text(host: str, answer: dict[str, object]) -> str | None:
    """What is wrong with the host's NCCL_IB_HCA (None: unset, or every entry picks a device)."""
    value = answer.get("value")
    if not isinstance(value, str) or not value.strip():
        return None
    raw = answer.get("devices")
    devices = {str(d): list(p) for d, p in raw.items()} if isinstance(raw, dict) else {}
    selection = parse(value.strip())
    where = f"NCCL_IB_HCA={value!r} (from {answer.get('from')})"
    has = ", ".join(f"{d} (ports {', '.join(map(str, p)) or 'none'})" for d, p in devices.items())
    has = f"it has {has}" if devices else "it has no RDMA device (/sys/class/infiniband is empty)"
    if selection.exclude:
        if devices and not picked(selection, devices):
            return f"{host}: {where} excludes every RDMA device of the host ({has}); NCCL would use sockets"
        return None
    missing = [
        f"{name}{'' if port is None else f':{port}'}"
        for name, port in selection.entries
        if not picked(Selection(False, selection.exact, ((name, port),)), devices)
    ]
    if not missing:
        return None
    return (
        f"{host}: {where} names no RDMA device of the host for {', '.join(missing)} ({has}); "
        "NCCL uses only the devices it names and, with none, TCP sockets: set network_tuning_nccl_ib_hca "
        "for this host to its devices, '=' first for exact names (e.g. =mlx5_0:1,mlx5_1:1)"
    )


def _ask(check: HostCheck, given: str | None) -> str | None:
    assert check.answers is not None
    try:
        line = check.answers.ask("rdma", (RDMA_ANSWER,))
    except ssh.SessionLost:
        return None  # the broken session is reported by the host's other checks
    if not line:
        return None
    try:
        answer = json.loads(line[len(RDMA_ANSWER) :])
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    if given:  # the job's own environment beats the host's files and the SSH session's
        answer["value"], answer["from"] = given, "launch --env"
    return problem_text(check.host.name, answer)


def problems(checks: list[HostCheck], given: str | None = None) -> list[Problem]:
    """Every host's NCCL_IB_HCA (`given`: the job's --env value) that picks none of its devices (only for a
    job on more than one host: on one host NCCL's traffic does not go over the network)."""
    asked = [c for c in checks if c.answers is not None and c.torch is not None]
    if len(checks) < 2 or not asked:
        return []
    texts = ssh.values(ssh.fan_out(asked, lambda check: _ask(check, given)))
    return [Problem(NOT_READY, text) for text in texts if text]
