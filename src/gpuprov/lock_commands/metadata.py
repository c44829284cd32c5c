"""Read each OS's repository metadata and the PyTorch index through the inventory's hosts, read-only.

Every host is reached over SSH (host key checking on) and its /etc/os-release read; one host of each OS (of
each repository URL) then fetches that repository's metadata with onhost/fetch_url.py, so the metadata is
what that host's apt/dnf sees: NVIDIA's repository, or the mirror `nvidia_repository_base_url` names, through
whatever proxy or name resolution the host has. The PyTorch index is read the same way, from
`python_env_pytorch_index_url` when set (a mirror, as python_env uses it), else PyTorch's page of every torch
wheel under `python_env_pytorch_index_base` (`<base>/torch/`: the same files as its per-tag indexes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuprov import gpu_generations, host_preflight, hosts, lock, onhost, repo_metadata, ssh
from gpuprov.errors import GpuprovError
from gpuprov.onhost import python_command
from gpuprov.repo_metadata import APT, DEBIAN, RPM, MetadataError, Offer

NVIDIA_REPOSITORIES = "https://developer.download.nvidia.com/compute/cuda/repos"  # the role's default
PYTORCH_INDEX_BASE = "https://download.pytorch.org/whl"  # python_env's default
ARCH_DIR = "x86_64"
FETCH_TIMEOUT_S = 180.0  # the host's own fetch gives up after 60 s per file
_FAMILY_KIND = {"ubuntu": APT, "debian": DEBIAN, "rhel": RPM}


@dataclass(frozen=True)
class HostOs:
    host: hosts.Host
    shown: str  # "Debian 12"
    repository: str  # "debian12"; "" when NVIDIA names no repository for it
    gpus: tuple[gpu_generations.PciGpu, ...] = ()  # from sysfs, as preflight reads them


@dataclass
class Gathered:
    hosts: list[HostOs] = field(default_factory=list)
    offers: dict[str, Offer] = field(default_factory=dict)  # repository -> what it carries
    torch: set[tuple[str, str, str]] = field(default_factory=set)
    torch_where: str = ""
    problems: list[host_preflight.Problem] = field(default_factory=list)


def gather(inventory: hosts.Inventory) -> Gathered:
    """Each host's OS, then each repository's offer and the torch wheels; problems per host."""
    found = Gathered()
    for outcome in ssh.fan_out(inventory.hosts, _read_os, timeout=60):
        host = outcome.item
        if outcome.error is not None:
            if isinstance(outcome.error, KeyboardInterrupt):
                raise outcome.error
            check = "host key" if isinstance(outcome.error, ssh.HostKeyProblem) else "ssh"
            found.problems.append(host_preflight.Problem(host.name, check, ssh.reason(outcome.error)))
            continue
        host_os = outcome.get()
        if not host_os.repository:
            message = f"{host_os.shown or 'this OS'}: NVIDIA has no CUDA repository for it"
            found.problems.append(host_preflight.Problem(host.name, "os", message))
        found.hosts.append(host_os)
    if found.problems:
        return found
    _read_repositories(found)
    if not found.problems:
        _read_torch_index(found)
    return found


def _read_os(host: hosts.Host) -> HostOs:
    client = ssh.connect(host, timeout=host_preflight.SSH_TIMEOUT_S)
    try:
        result = ssh.run(client, "cat /etc/os-release", host_preflight.COMMAND_TIMEOUT_S)
        gpus = host_preflight.read_gpus(client)
    finally:
        client.close()
    fields = host_preflight.parse_os_release(result.stdout if result.rc == 0 else "")
    os_id, version = fields.get("ID", ""), fields.get("VERSION_ID", "")
    shown = f"{fields.get('NAME', os_id)} {version}".strip()
    return HostOs(host, shown, lock.repository_for(os_id, version), gpus)


def repository_url(host: hosts.Host, repository: str) -> str:
    base = str(host.vars.get("nvidia_repository_base_url") or NVIDIA_REPOSITORIES).rstrip("/")
    return f"{base}/{repository}/{ARCH_DIR}"


def torch_index_url(host: hosts.Host) -> str:
    mirror = str(host.vars.get("python_env_pytorch_index_url") or "").rstrip("/")
    if mirror:
        return f"{mirror}/torch/"
    base = str(host.vars.get("python_env_pytorch_index_base") or PYTORCH_INDEX_BASE).rstrip("/")
    return f"{base}/torch/"


def _read_repositories(found: Gathered) -> None:
    """One host per (repository, URL): its metadata, parsed into an Offer; repositories of one name but
    different URLs (a mirror for some hosts) are intersected, as the lock must fit them all."""
    groups: dict[tuple[str, str], list[HostOs]] = {}
    for host_os in found.hosts:
        groups.setdefault((host_os.repository, repository_url(host_os.host, host_os.repository)), []).append(
            host_os
        )
    for (repository, url), members in groups.items():
        kind = _FAMILY_KIND[repository.rstrip("0123456789")]
        try:
            offer = _repository_offer(members[0].host, url, kind)
        except (GpuprovError, MetadataError) as exc:
            message = f"cannot read {repository}'s metadata at {url}: {_why(exc, members[0].host)}"
            found.problems += [host_preflight.Problem(m.host.name, "repository", message) for m in members]
            continue
        found.offers[repository] = (
            _intersect(found.offers[repository], offer) if repository in found.offers else offer
        )


def _repository_offer(host: hosts.Host, url: str, kind: str) -> Offer:
    if kind != RPM:
        return repo_metadata.offer(repo_metadata.apt_packages(fetch(host, f"{url}/Packages.gz")), kind)
    primary = repo_metadata.primary_location(fetch(host, f"{url}/repodata/repomd.xml"))
    return repo_metadata.offer(repo_metadata.rpm_packages(fetch(host, f"{url}/{primary}")), RPM)


def _read_torch_index(found: Gathered) -> None:
    urls: dict[str, list[HostOs]] = {}
    for host_os in found.hosts:
        urls.setdefault(torch_index_url(host_os.host), []).append(host_os)
    wheel_sets = []
    for url, members in urls.items():
        try:
            wheel_sets.append(repo_metadata.torch_wheels(fetch(members[0].host, url)))
        except GpuprovError as exc:
            message = f"cannot read the PyTorch index at {url}: {_why(exc, members[0].host)}"
            found.problems += [host_preflight.Problem(m.host.name, "pytorch index", message) for m in members]
    found.torch = set.intersection(*wheel_sets) if wheel_sets else set()
    found.torch_where = " and ".join(urls)


def fetch(host: hosts.Host, url: str) -> str:
    """The file at url as the host fetches it (gzip unpacked there); GpuprovError with its one line."""
    python = str(host.vars.get("ansible_python_interpreter") or "python3")
    client = ssh.connect(host, timeout=host_preflight.SSH_TIMEOUT_S)
    try:
        result = ssh.run(client, python_command(python, onhost.text("fetch_url.py"), url), FETCH_TIMEOUT_S)
    finally:
        client.close()
    if result.rc != 0:
        raise GpuprovError(result.last_line)
    return result.stdout


def _why(exc: Exception, host: hosts.Host) -> str:
    return ssh.without_label(exc, host) if isinstance(exc, GpuprovError) else str(exc)


def _intersect(a: Offer, b: Offer) -> Offer:
    drivers = {v: a.drivers[v] & b.drivers[v] for v in a.drivers.keys() & b.drivers.keys()}
    return Offer(drivers, a.cuda & b.cuda, a.cudnn & b.cudnn, a.nccl & b.nccl)


def allow_cpu(inventory: hosts.Inventory) -> bool:
    """Whether every host may take the CPU build of PyTorch (python_env_allow_cpu_torch)."""
    return all(_truthy(h.vars.get("python_env_allow_cpu_torch")) for h in inventory.hosts)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "yes", "true", "on", "y")
    return bool(value)


def by_repository(gathered: Gathered) -> Mapping[str, list[HostOs]]:
    groups: dict[str, list[HostOs]] = {}
    for host_os in gathered.hosts:
        groups.setdefault(host_os.repository, []).append(host_os)
    return groups
