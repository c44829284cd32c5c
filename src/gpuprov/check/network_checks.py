"""Per-host network checks: the sysctls network_tuning set, /etc/nccl.conf, the NCCL interface, InfiniBand."""

from __future__ import annotations

from collections.abc import Mapping

from gpuprov.check import busbw_threshold, expected, parsers
from gpuprov.check.host_view import HostView, did_not_run
from gpuprov.check.results import Result, Status


def sysctl(view: HostView) -> list[Result]:
    wanted = expected.sysctls(view.vars)
    found: Mapping[str, str | None] = view.data.get("sysctl") or {}
    unsettable = set(view.data.get("sysctl_readonly") or [])
    tolerated = expected.truthy(
        expected.variable(view.vars, "network_tuning", "network_tuning_tolerate_unsettable")
    )
    wrong: list[str] = []
    allowed: list[str] = []
    for key, value in wanted.items():
        if found.get(key) != value:
            entry = f"{key}={found.get(key) or '(absent)'} (wanted {value})"
            (allowed if tolerated and key in unsettable else wrong).append(entry)
    source = "network_tuning role (network_tuning_sysctl, _extra, _ephemeral_ports)"
    if wrong:
        return [
            view.result(
                "sysctl",
                Status.FAIL,
                measured=f"{len(wrong)} of {len(wanted)} differ",
                expected="as set by the role",
                source=source,
                detail="; ".join(wrong[:4]),
                action="run gpuprov bootstrap (network_tuning sets them again), or find what reset them",
            )
        ]
    if allowed:
        return [
            view.result(
                "sysctl",
                Status.WARN,
                measured=f"{len(allowed)} of {len(wanted)} not in force",
                source=source,
                expected="as set by the role",
                detail="cannot be set here (read-only; network_tuning_tolerate_unsettable is on): "
                + "; ".join(allowed[:3]),
                action="set them on the host the container or VM runs on, or leave them",
            )
        ]
    return [view.result("sysctl", Status.PASS, measured=f"{len(wanted)} in force", source=source)]


def nccl_conf(view: HostView) -> list[Result]:
    text = view.data.get("nccl_conf")
    wanted = expected.nccl_settings(view.vars)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "no settings"
    source = "network_tuning role (network_tuning_nccl_*)"
    if text is None:
        return [
            view.result(
                "nccl-conf",
                Status.FAIL,
                measured="missing",
                expected=shown,
                source=source,
                action="run gpuprov bootstrap (network_tuning writes it)",
            )
        ]
    found = {}
    for line in str(text).splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return [
        view.verdict(
            "nccl-conf",
            found == wanted,
            measured=", ".join(f"{k}={v}" for k, v in sorted(found.items())) or "no settings",
            expected=shown,
            source=source,
            action="run gpuprov bootstrap (network_tuning renders it again)",
        )
    ]


def nccl_interface(view: HostView) -> list[Result]:
    setting = str(
        view.vars.get("nccl_socket_ifname")
        or expected.variable(view.vars, "network_tuning", "network_tuning_nccl_socket_ifname")
        or ""
    )
    if not setting:
        return view.not_applicable(
            "nccl-interface", "NCCL_SOCKET_IFNAME is not set: NCCL picks the interface"
        )
    interfaces: Mapping[str, str] = view.data.get("interfaces") or {}
    problems = []
    for entry in (e.strip() for e in setting.split(",")):
        if not entry or entry.startswith("^"):
            continue
        exact = entry.startswith("=")
        name = entry[1:] if exact else entry
        matches = [i for i in interfaces if (i == name if exact else i.startswith(name))]
        if not matches:
            problems.append(f"{entry}: no such interface")
        elif not any(interfaces[i] in ("up", "unknown") for i in matches):
            problems.append(f"{entry}: {', '.join(f'{i} {interfaces[i]}' for i in matches)}")
    return [
        view.verdict(
            "nccl-interface",
            not problems,
            measured="; ".join(problems) or "up",
            expected=f"{setting} up",
            source="inventory (network_tuning_nccl_socket_ifname)",
            action="bring the interface up or fix network_tuning_nccl_socket_ifname",
        )
    ]


def infiniband(view: HostView) -> list[Result]:
    if not view.data.get("infiniband"):
        return view.not_applicable("infiniband", "no InfiniBand/RoCE device (/sys/class/infiniband is empty)")
    run = view.tool("ibstat")
    why = did_not_run(run, "ibstat")
    if why:
        return [
            view.result("infiniband", Status.COULD_NOT_RUN, detail=why, action="install infiniband-diags")
        ]
    ports = parsers.ibstat(str(run.get("stdout", "")))
    # Where NCCL_IB_HCA names NCCL's CAs, only theirs are judged: storage and management ports are not NCCL's.
    ib_hca = str(expected.variable(view.vars, "network_tuning", "network_tuning_nccl_ib_hca") or "")
    hcas = busbw_threshold.hca_names(ib_hca)
    others = sorted({p.ca for p in ports if ib_hca and not busbw_threshold.selected(p.ca, hcas)})
    ports = [p for p in ports if p.ca not in others]
    wanted_rate = view.vars.get("gpuprov_check_ib_rate_gbps")
    # Without NCCL_IB_HCA, NCCL uses the ports that are up: an uncabled storage or spare port beside active
    # ones is a warning (name NCCL's CAs to make theirs fail), a host with none up fails.
    down_warns = not ib_hca and any(p.state == "Active" and p.physical_state == "LinkUp" for p in ports)
    results = []
    if others:
        shown = f"{', '.join(others)}: not NCCL's (network_tuning_nccl_ib_hca={ib_hca}), not judged"
        results.append(view.result("infiniband", Status.NOT_APPLICABLE, detail=shown))
    for port in ports:
        where = f"{port.ca} port {port.port}"
        down = port.state != "Active" or port.physical_state != "LinkUp"
        slow = bool(wanted_rate) and port.rate is not None and port.rate < float(str(wanted_rate))
        problems = [f"{port.state} / {port.physical_state}"] if down else []
        problems += [f"rate {port.rate} < {wanted_rate}"] if slow else []
        results.append(
            view.verdict(
                "infiniband",
                not problems,
                otherwise=Status.WARN if down_warns and not slow else Status.FAIL,
                measured=f"{where}: {port.state} / {port.physical_state} rate {port.rate}",
                expected="Active / LinkUp" + (f", rate >= {wanted_rate}" if wanted_rate else ""),
                unit="Gb/s",
                source="inventory (gpuprov_check_ib_rate_gbps)" if wanted_rate else "ibstat",
                action="check the cable, the switch port and the subnet manager"
                + ("; or name NCCL's CAs in network_tuning_nccl_ib_hca" if down_warns else ""),
            )
        )
    return results or [view.result("infiniband", Status.COULD_NOT_RUN, detail="ibstat listed no port")]
