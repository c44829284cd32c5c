"""What each host should have: the lock (`gpu_stack`), the roles' defaults and the inventory's variables.

The values are the ones bootstrap applied: a role's default unless the inventory (or `-e`) sets the variable.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import yaml

from gpuprov import resources

LOCK_SOURCE = "the lock (gpu_stack)"


@functools.cache
def role_defaults(role: str) -> Mapping[str, Any]:
    path = resources.data_dir("roles") / role / "defaults" / "main.yml"
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    return data if isinstance(data, Mapping) else {}


def variable(host_vars: Mapping[str, Any], role: str, name: str) -> Any:
    """The variable as the role sees it: the inventory's value, else the role's default."""
    if name in host_vars:
        return host_vars[name]
    return role_defaults(role).get(name)


def truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "yes", "true", "on", "y")
    return bool(value)


def sysctls(host_vars: Mapping[str, Any]) -> dict[str, str]:
    """The sysctl values network_tuning sets (its __network_tuning_sysctl_all), whitespace normalised."""
    wanted = dict(variable(host_vars, "network_tuning", "network_tuning_sysctl") or {})
    ports = str(variable(host_vars, "network_tuning", "network_tuning_ephemeral_ports") or "")
    if ports:
        wanted["net.ipv4.ip_local_port_range"] = ports.replace("-", " ")
    wanted.update(dict(variable(host_vars, "network_tuning", "network_tuning_sysctl_extra") or {}))
    return {str(k): " ".join(str(v).split()) for k, v in wanted.items()}


def nccl_settings(host_vars: Mapping[str, Any]) -> dict[str, str]:
    """The settings network_tuning writes to /etc/nccl.conf (its __network_tuning_nccl_settings)."""
    settings = {
        "NCCL_SOCKET_IFNAME": variable(host_vars, "network_tuning", "network_tuning_nccl_socket_ifname"),
        "NCCL_IB_HCA": variable(host_vars, "network_tuning", "network_tuning_nccl_ib_hca"),
        "NCCL_IB_GID_INDEX": variable(host_vars, "network_tuning", "network_tuning_nccl_ib_gid_index"),
        "NCCL_NET_GDR_LEVEL": variable(host_vars, "network_tuning", "network_tuning_nccl_net_gdr_level"),
        "NCCL_DEBUG": variable(host_vars, "network_tuning", "network_tuning_nccl_debug"),
        "NCCL_SOCKET_FAMILY": variable(host_vars, "network_tuning", "network_tuning_nccl_socket_family"),
    }
    settings.update(dict(variable(host_vars, "network_tuning", "network_tuning_nccl_extra") or {}))
    return {k: str(v) for k, v in settings.items() if v is not None and str(v) != ""}


def port_range(host_vars: Mapping[str, Any], name: str) -> tuple[int, int]:
    text = str(variable(host_vars, "network_tuning", name))
    first, _, last = text.partition("-")
    return int(first), int(last or first)
