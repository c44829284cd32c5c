"""What moving from one lock to another changes: per field, and per host from the versions its roles verified.

Pure: the two locks and each host's last verified versions (`gpuprov_verified`, as the run records keep them)
in, the changes out. `gpuprov lock diff` shows them; `gpuprov upgrade` plans its rollout from them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Component:
    """One part of the stack: the lock fields that pin it, the role that installs it, the key its verify step
    publishes, and what changing it does to a host in use."""

    name: str
    fields: tuple[str, ...]
    role: str
    reboot: bool  # a new kernel module: the running driver changes only with a reboot (or module reload)
    jobs: str  # what a job running on the host meets while this part changes
    # Other roles that read this part's lock fields, so must run again when it changes.
    readers: tuple[str, ...] = ()


_LIBRARY = "new processes load the new libraries; a job that starts ranks meanwhile mixes versions"
COMPONENTS: tuple[Component, ...] = (
    Component(
        "driver",
        ("driver_branch", "driver_version", "driver_flavor"),
        "nvidia_driver",
        True,
        "CUDA processes stop: the kernel module is replaced and the host reboots",
    ),
    # cuDNN's package is chosen by CUDA's major (roles/cudnn/defaults: cudnn_cuda_major), NCCL's by its
    # major.minor (roles/nccl/defaults: nccl_cuda_build, libnccl2 2.21.5-1+cuda12.4).
    Component("cuda", ("cuda_version",), "cuda", False, _LIBRARY, readers=("cudnn", "nccl")),
    Component("cudnn", ("cudnn_version",), "cudnn", False, _LIBRARY),
    Component("nccl", ("nccl_version",), "nccl", False, _LIBRARY),
    Component(
        "pytorch",
        ("pytorch_version", "pytorch_cuda_tag"),
        "python_env",
        False,
        "the environment's torch is replaced in place: a running job's late imports fail",
    ),
    # Optional: python_env builds Horovod (it publishes `horovod`), against the Open MPI the mpi role
    # installs with its headers when the lock names a Horovod (roles/mpi/defaults: mpi_devel).
    Component("horovod", ("horovod_version",), "python_env", False, _LIBRARY, readers=("mpi",)),
    Component("openmpi", ("openmpi_version",), "mpi", False, _LIBRARY),
    Component("container_toolkit", ("container_toolkit_version",), "container_runtime", False, _LIBRARY),
)
# The roles in playbooks/site.yml's order; each role there carries its name as a tag, so a run with
# `--tags ROLE,...` applies those roles (and the ones they depend on) after the always-tagged preflight.
SITE_ROLES = (
    "nvidia_driver", "cuda", "cudnn", "nccl", "network_tuning", "mpi", "python_env", "container_runtime",
)  # fmt: skip


def roles_to_run(changed: set[str]) -> list[str]:
    """The roles that apply a set of changed components: each one's own role and the roles that read its
    fields, in site.yml's order."""
    wanted_roles = {role for c in COMPONENTS if c.name in changed for role in (c.role, *c.readers)}
    return [role for role in SITE_ROLES if role in wanted_roles]


def batch_roles(per_host: Iterable[Iterable[str]]) -> list[str]:
    """The roles a batch needs: the union of its hosts' roles, in site.yml's order."""
    union = {role for roles in per_host for role in roles}
    return [role for role in SITE_ROLES if role in union]


def batch_tags(per_host: Iterable[Iterable[str]]) -> tuple[str, ...]:
    """The site.yml tags a batch's run gets: batch_roles, or () (the whole playbook) when a host's change
    names no role. The one rule for what a batch applies, for the plan shown and the run alike."""
    listed = [list(roles) for roles in per_host]
    return tuple(batch_roles(listed)) if all(listed) else ()


def version_key(version: str) -> tuple[int, ...]:
    """The numbers of a version, for ordering ("550.127.08" -> (550, 127, 8)); text after '+' or '-' is not
    compared ("2.21.5+cuda12.4", "2.13.0+cpu")."""
    head = re.split(r"[+-]", version, maxsplit=1)[0]
    return tuple(int(part) for part in re.findall(r"\d+", head))


def wanted(component: Component, lock: Mapping[str, Any]) -> str | None:
    """The version the lock asks of a component, written as its role publishes it; None when the lock
    leaves the component out."""
    if component.name == "pytorch":
        if "pytorch_version" not in lock:
            return None
        return f"{lock['pytorch_version']}+{lock.get('pytorch_cuda_tag', 'cpu')}"
    if component.name == "driver":
        return str(lock["driver_version"]) if "driver_version" in lock else None
    value = lock.get(component.fields[0])
    return None if value is None else str(value)


def matches(component: Component, have: str, want: str) -> bool:
    """Does the version a host verified satisfy the lock's? NCCL publishes its CUDA build after '+', Open MPI
    its full release under the lock's series ("4.1.4" is series "4.1")."""
    if component.name == "pytorch":
        return have == want
    if component.name == "openmpi":
        return version_key(have)[:2] == version_key(want)
    return version_key(have) == version_key(want)


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: str | None
    new: str | None

    @property
    def downgrade(self) -> bool:
        if self.old is None or self.new is None or self.field.endswith(("_flavor", "_tag")):
            return False
        return version_key(self.new) < version_key(self.old)


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """The fields whose value differs, in the lock's order (the known fields first, then the rest)."""
    order = [f for c in COMPONENTS for f in c.fields]
    names = [*order, *sorted((set(old) | set(new)) - set(order))]
    changes = []
    for name in names:
        before = None if old.get(name) is None else str(old[name])
        after = None if new.get(name) is None else str(new[name])
        if before != after:
            changes.append(FieldChange(name, before, after))
    return changes


@dataclass(frozen=True)
class PartChange:
    component: str
    have: str | None  # what the host verified last (None: no record)
    want: str
    source: str  # "verified" or "old lock" (no record of the host: the old lock's value is assumed)

    @property
    def downgrade(self) -> bool:
        return self.have is not None and version_key(self.want) < version_key(self.have)


@dataclass(frozen=True)
class HostChanges:
    host: str
    parts: list[PartChange] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    reboot: bool = False
    jobs: list[str] = field(default_factory=list)  # what running jobs would meet

    @property
    def downgrades(self) -> list[PartChange]:
        return [part for part in self.parts if part.downgrade]

    def as_dict(self) -> dict[str, Any]:
        return {
            "parts": [
                {"component": p.component, "have": p.have, "want": p.want, "source": p.source}
                for p in self.parts
            ],
            "roles": self.roles,
            "reboot": self.reboot,
            "jobs": self.jobs,
        }


def host_changes(
    host: str, old: Mapping[str, Any], new: Mapping[str, Any], verified: Mapping[str, str] | None
) -> HostChanges:
    """What the new lock changes on one host: each component whose verified version (else the old lock's)
    is not the new lock's. A driver change needs a reboot; the changed roles are what the rollout applies."""
    parts: list[PartChange] = []
    for component in COMPONENTS:
        want = wanted(component, new)
        if want is None:
            continue
        have, source = (verified or {}).get(component.name), "verified"
        if have is None:
            have, source = wanted(component, old), "old lock"
        flavor_changes = component.name == "driver" and old.get("driver_flavor") != new.get("driver_flavor")
        if have is not None and matches(component, have, want) and not flavor_changes:
            continue
        parts.append(PartChange(component.name, have, want, source))
    changed = {part.component for part in parts}
    chosen = [c for c in COMPONENTS if c.name in changed]
    return HostChanges(
        host,
        parts,
        roles=roles_to_run(changed),
        reboot=any(c.reboot for c in chosen),
        jobs=sorted({c.jobs for c in chosen}),
    )
