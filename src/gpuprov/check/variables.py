"""The variables `gpuprov check` reads from -e or the inventory that must be right before any host is
contacted (exit 2): the numbers it compares with (never `expected >= nan`, never a host blamed for a bad
threshold), and, from -e, none that say how to reach a host.

-e overrides the inventory (as ansible-playbook's extra vars do) for what check compares with. It does not
change how check reaches the hosts: the bandwidth test runs through `gpuprov launch`, which reads the SSH
settings from the inventory only, so an `-e ansible_port=...` would reach one port for the per-host checks and
another for the all-reduce. Such a setting (address, port, user, key, known-hosts file: what gpuprov's own SSH
layer reads) is refused in one line rather than half applied or ignored. Become settings and ssh arguments
other than UserKnownHostsFile (ProxyJump, ...) are for Ansible's runs and change nothing check does, so a
vars file shared by every verb (-e @site.yml) passes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpuprov import hosts
from gpuprov.errors import BadInput

# name -> what it is, for the message
THRESHOLDS = {
    "gpuprov_check_min_busbw_gbps": "the all-reduce's busbw threshold in GB/s",
    "gpuprov_check_ib_rate_gbps": "the rate each InfiniBand port should have, Gb/s",
}


def positive_number(value: Any) -> float:
    """A finite number above 0 (a YAML number or its text); ValueError for nan, inf, -1, true, ..."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(value)
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(value)
    return number


def check_extra_vars(values: Mapping[str, Any]) -> None:
    """-e's values: nothing that changes how gpuprov reaches a host, every number by its rule."""
    for name in hosts.CONNECTION_VARIABLES:
        if name in values and _changes_reach(name, values[name]):
            raise BadInput(
                f"-e {name}: check reaches the hosts as the inventory says (its bandwidth test's launch "
                f"reads only the inventory); set {name} in the inventory (host or group vars) instead"
            )
    _check_numbers(values, lambda name: f"-e {name}={values[name]!r}: ", "correct the -e value")


def _changes_reach(name: str, value: Any) -> bool:
    if name in hosts.REACH_VARIABLES:
        return True
    if name in hosts.SSH_ARGS_VARIABLES:  # gpuprov's SSH layer reads their known-hosts file only
        return hosts.ssh_option(str(value or ""), "UserKnownHostsFile") is not None
    return False  # become: check runs no become (its one sudo is `sudo -n dmesg`)


def check_inventory(name: str, values: Mapping[str, Any], overridden: Mapping[str, Any]) -> None:
    """A host's inventory values, those -e does not override."""
    own = {k: v for k, v in values.items() if k not in overridden}
    _check_numbers(own, lambda var: f"host {name}: {var} {own[var]!r}: ", "fix it in the inventory")


def _check_numbers(values: Mapping[str, Any], where: Any, fix: str) -> None:
    for name, what in THRESHOLDS.items():
        if name in values:
            try:
                positive_number(values[name])
            except ValueError:
                raise BadInput(f"{where(name)}not a number above 0 ({what}); {fix}") from None
    try:
        hosts.gpu_count(values)
    except ValueError:
        raise BadInput(
            f"{where(hosts.GPU_COUNT_VARIABLE)}not a whole number of GPUs (0 or more); {fix}"
        ) from None
