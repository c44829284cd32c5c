"""The drift check: which hosts and roles a bootstrap re-run has anything to do on, decided before Ansible.

Per host: its input fingerprint (gpuprov.bootstrap.fingerprint) and the probe's report (the digest of every
item the roles' manifests name, and the host's identity) against the record of the last ok run
(gpuprov.bootstrap.drift_records). No record, another fingerprint or identity, a probe that failed or a
manifest it could not read: the host gets a full run, and the reason is said. Otherwise the roles whose items
differ from the record, or whose manifest appeared or vanished, have drifted; their site.yml tags
(gpuprov.bootstrap.role_map) are what the run applies. Then one plan for the whole inventory: no Ansible run
when nothing drifted; else one run limited to the hosts that need anything, with the union of their tags
(no tag limit at all when any host needs a full run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuprov.bootstrap.drift_records import Record
from gpuprov.bootstrap.role_map import RoleMap

IDENTITY_KEYS = (
    "kernel",
    "os_release",
    "machine_id",
    "nvidia_driver",
    "nvidia_devices",
    "cpus",
    "memory_kb",
    "ipv4",
)


@dataclass
class HostCheck:
    host: str
    full: str = ""  # why the host gets a full run; "" when the drift check could read it
    drifted: dict[str, list[str]] = field(default_factory=dict)  # role -> its changed items
    items: int = 0  # items checked
    report: dict[str, Any] | None = None  # the probe's, for the record after the run

    def as_dict(self) -> dict[str, Any]:
        return {"full_run": self.full or None, "drifted": self.drifted, "items_checked": self.items}


@dataclass(frozen=True)
class Plan:
    hosts: list[str]  # the hosts Ansible runs on; [] means no Ansible run
    tags: list[str]  # [] with hosts: every role (a full run)
    checks: list[HostCheck]

    @property
    def runs_ansible(self) -> bool:
        return bool(self.hosts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ansible_run": self.runs_ansible,
            "hosts": self.hosts,
            "tags": self.tags,
            "checked": {c.host: c.as_dict() for c in self.checks},
        }


def _item_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    changes = []
    for item in sorted(set(before) | set(after)):
        if item not in after:
            changes.append(f"{item} is no longer listed")
        elif item not in before:
            changes.append(f"{item} is new")
        elif before[item] != after[item]:
            changes.append(f"{item} {'is absent' if after[item] == 'absent' else 'changed'}")
    return changes


def compare(host: str, fingerprint: str | None, record: Record | None, report: Any) -> HostCheck:
    """What drifted on one host since its record, or why it gets a full run."""
    check = HostCheck(host)
    if not isinstance(report, dict):
        check.full = f"the drift check could not read the host: {report or 'no probe report'}"
        return check
    check.report = report
    roles = report["roles"]
    check.items = sum(len(r.get("items", {})) for r in roles.values() if isinstance(r, dict))
    errors = [
        f"{role}: {r['error']}" for role, r in sorted(roles.items()) if "error" in r or "items" not in r
    ]
    if fingerprint is None:
        check.full = "a variable of the run or host reads through a lookup, which the drift check cannot see"
    elif record is None:
        check.full = "no record of an earlier ok run"
    elif errors:
        check.full = f"the probe could not read a manifest: {errors[0]}"
    elif record.fingerprint != fingerprint:
        check.full = (
            "the inputs changed since the last ok run (roles, playbooks, inventory, vars or versions)"
        )
    else:
        identity = report.get("identity", {})
        moved = [key for key in IDENTITY_KEYS if identity.get(key) != record.identity.get(key)]
        if moved:
            check.full = f"the host is not the one recorded: {', '.join(moved)} changed"
    if check.full or record is None:
        return check
    for role in sorted(set(record.roles) | set(roles)):
        if role not in roles:
            check.drifted[role] = ["its manifest vanished"]
        elif role not in record.roles:
            check.drifted[role] = ["its manifest appeared"]
        else:
            changes = _item_changes(record.roles[role], roles[role]["items"])
            if changes:
                check.drifted[role] = changes
    return check


def make_plan(checks: list[HostCheck], roles: RoleMap, all_hosts: Iterable[str]) -> Plan:
    """One Ansible run for every host that needs anything, or none."""
    for check in checks:  # a drifted role no tag re-applies (a role site.yml does not use): run everything
        lost = [role for role in check.drifted if not roles.tags_of.get(role)]
        if lost and not check.full:
            check.full = f"role {lost[0]} drifted and no site.yml tag re-applies it alone"
    needy = [c.host for c in checks if c.full or c.drifted]
    if not needy:
        return Plan([], [], checks)
    if any(c.full for c in checks):
        # A full run plays every role, the cluster-wide ones too: they read every host of the play
        # (slurm.conf's nodes, the firewall's peers, mpi's known_hosts), and slurm's and mpi's preflights
        # refuse a play without the whole cluster. One ansible-playbook run cannot give hosts different
        # tags: all go in full.
        return Plan(list(all_hosts) if roles.cluster_wide else needy, [], checks)
    tags = sorted({tag for c in checks for role in c.drifted for tag in roles.tags_of[role]})
    if set(tags) & roles.cluster_wide:  # the role reads the whole play: every host takes part
        needy = list(all_hosts)
    return Plan(needy, tags, checks)


def record_of(check_report: Mapping[str, Any], fingerprint: str, run_id: str) -> Record | None:
    """The record of a host's probe after an ok run; None when the probe could not read every manifest."""
    roles = check_report.get("roles", {})
    if any("items" not in r for r in roles.values()):
        return None
    identity = {key: check_report.get("identity", {}).get(key) for key in IDENTITY_KEYS}
    return Record(fingerprint, identity, {role: dict(r["items"]) for role, r in roles.items()}, run_id)


def lines(plan: Plan) -> list[str]:
    """The console's lines: one per drifted item ("node1: nccl: files /etc/nccl.conf changed"), one per
    host that gets a full run and why."""
    out = []
    for check in plan.checks:
        if check.full:
            out.append(f"{check.host}: full run: {check.full}")
        for role, changes in check.drifted.items():
            out += [f"{check.host}: {role}: {change}" for change in changes]
    return out
