"""The rendezvous and NCCL/gloo ports of every host, reached from every other host (firewall kept on).

Each host listens (hostprobe.py listen) on the first free port of the rendezvous range and on a port the
kernel picks from ip_local_port_range, the range NCCL and gloo listen on; then every host connects to every
other host's two ports at once. Two SSH commands per host, on the connections gather opened.
"""

from __future__ import annotations

import json

from gpuprov import porttest, ssh
from gpuprov.check import expected
from gpuprov.check.gather import Gathered, probe_code, system_python
from gpuprov.check.results import Result, Status
from gpuprov.errors import GpuprovError
from gpuprov.onhost import python_command

CONNECT_TIMEOUT_S = 3.0
LISTEN_TIMEOUT_S = 30.0
KINDS = ("rendezvous", "NCCL/gloo")
ACTION = (
    "open TCP {ranges} to the cluster's nodes in the host's firewall "
    "(gpuprov bootstrap does: network_tuning), or find the rule that closes it"
)


def _ranges(found: Gathered) -> str:
    v = found.host.vars
    return (
        f"{expected.variable(v, 'network_tuning', 'network_tuning_rendezvous_ports')} and "
        f"{expected.variable(v, 'network_tuning', 'network_tuning_ephemeral_ports')}"
    )


def _start_listener(found: Gathered, expected_peers: int) -> tuple[ssh.Channel, int, int]:
    assert found.client is not None
    first, last = expected.port_range(found.host.vars, "network_tuning_rendezvous_ports")
    args = (str(first), str(last), str(expected_peers), str(LISTEN_TIMEOUT_S))
    command = python_command(system_python(found.host), probe_code(), "listen", *args)
    try:
        channel = ssh.open_channel(found.client, command, read_timeout=LISTEN_TIMEOUT_S + 10)
        line = channel.readline().decode(errors="replace").split()
    except ssh.SessionLost as exc:
        raise GpuprovError(f"cannot start the listener: {ssh.reason(exc.cause)}") from None
    if len(line) != 3 or line[0] != "ports":
        raise GpuprovError(
            f"no free port in {first}-{last}" if line[:1] == ["busy"] else "the listener did not start"
        )
    return channel, int(line[1]), int(line[2])


def _listen_everywhere(
    ready: list[Gathered],
) -> tuple[dict[str, tuple[str, dict[str, int]]], list[ssh.Channel], list[Result]]:
    """Every host's listener started at once: host -> (address, port by kind), the channels, the failures."""
    listening: dict[str, tuple[str, dict[str, int]]] = {}
    channels: list[ssh.Channel] = []
    results: list[Result] = []
    for started in ssh.fan_out(ready, lambda g: _start_listener(g, len(ready) - 1)):
        host = started.item.host
        if started.error is not None:
            why = started.error.message if isinstance(started.error, GpuprovError) else str(started.error)
            results.append(
                Result(
                    "ports", host.name, Status.COULD_NOT_RUN, detail=why, action="free a port of the range"
                )
            )
            continue
        channel, rendezvous, ephemeral = started.get()
        channels.append(channel)
        listening[host.name] = (host.address, dict(zip(KINDS, (rendezvous, ephemeral), strict=True)))
    return listening, channels, results


def _connect_from(source: Gathered, tried: list[porttest.Probe]) -> dict[porttest.Probe, str]:
    """The source's probes, all at once in one command: each one's answer (`ok` or why not)."""
    assert source.client is not None
    mine = [p for p in tried if p.source == source.host.name]
    targets = [[str(i), p.address, p.port, p.token] for i, p in enumerate(mine)]
    command = python_command(
        system_python(source.host), probe_code(), "connect", str(CONNECT_TIMEOUT_S), json.dumps(targets)
    )
    res = ssh.run(source.client, command, timeout=CONNECT_TIMEOUT_S * 4 + 20)
    answer: dict[str, str] = json.loads(res.stdout.strip().splitlines()[-1])
    return {p: answer.get(str(i), "no answer") for i, p in enumerate(mine)}


def _verdict(g: Gathered, ports: dict[str, int], problems: list[str], peers: int) -> Result:
    return Result(
        "ports",
        g.host.name,
        Status.FAIL if problems else Status.PASS,
        measured=f"{peers - len({p.split()[0] for p in problems})} of {peers} hosts reach both ports",
        expected=f"every other host reaches {ports[KINDS[0]]} (rendezvous) and {ports[KINDS[1]]} (NCCL/gloo)",
        source="network_tuning role (firewall ranges)",
        detail="; ".join(problems[:3]),
        action=ACTION.format(ranges=_ranges(g)) if problems else "",
    )


def check(found: list[Gathered]) -> list[Result]:
    ready = [g for g in found if g.client is not None and g.error is None]
    if len(ready) < 2:
        return [Result("ports", "cluster", Status.NOT_APPLICABLE, detail="fewer than two hosts to connect")]
    listening, channels, results = _listen_everywhere(ready)
    tried = porttest.probes([g.host.name for g in ready], listening)
    answers: dict[porttest.Probe, str] = {}
    try:
        for outcome in ssh.fan_out(ready, lambda g: _connect_from(g, tried)):
            if outcome.error is not None:
                detail = f"the connection test failed: {ssh.reason(outcome.error)}"
                results.append(Result("ports", outcome.item.host.name, Status.COULD_NOT_RUN, detail=detail))
                continue
            answers.update(outcome.get())
    finally:
        for channel in channels:
            channel.close()
    failed: dict[str, list[str]] = {}
    answered = [p for p in tried if p in answers]  # not the probes of a host whose test could not run
    for p, why in porttest.failures(answered, answers).items():
        failed.setdefault(p.target, []).append(
            f"{p.source} cannot reach {p.target}:{p.port} ({p.kind}): {why}"
        )
    for g in ready:
        if g.host.name in listening:
            ports = listening[g.host.name][1]
            results.append(_verdict(g, ports, failed.get(g.host.name, []), len(ready) - 1))
    return results
