"""The INI inventory a sandbox writes for Ansible and for gpuprov's own commands."""

from __future__ import annotations

import os
import shlex
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuprov import resources
from gpuprov.sandbox import standins
from gpuprov.sandbox.standins.keyring import SANDBOX_REPOS_URL


@dataclass(frozen=True)
class NodeEntry:
    name: str
    address: str
    os_name: str


@dataclass(frozen=True)
class InventoryContext:
    sandbox: str
    user: str
    private_key: Path
    known_hosts: Path
    mirror_url: str
    mirror_key_fingerprint: str
    slurm: bool = False
    registry: str | None = None  # host:port of the sandbox's image registry (`sandbox up --containers`)
    sandbox_image: str | None = None  # the PyTorch image there, by digest


# Every node's rootfs is Debian 12's, so its interpreter is Python 3.11 whatever /etc/os-release says. The
# ubuntu-like nodes pin it: python_env would take Ubuntu 22.04's python3 (3.10), which this rootfs lacks.
# debian12 nodes have it as their python3, rocky9 nodes as AppStream's python3.11, both chosen by the role.
PINNED_PYTHON = "3.11"
PINNED_PYTHON_OSES = ("ubuntu22.04",)


def render(nodes: list[NodeEntry], ctx: InventoryContext) -> str:
    lines = [
        f"# Sandbox {ctx.sandbox!r}, written by `gpuprov sandbox up`; `gpuprov sandbox down` removes it.",
        "# The nodes are containers standing in for GPU servers (see docs/stand-ins.md).",
        "[gpu_nodes]",
    ]
    for node in nodes:
        pinned = f" python_env_python_version={PINNED_PYTHON}" if node.os_name in PINNED_PYTHON_OSES else ""
        lines.append(f"{node.name} ansible_host={node.address} gpuprov_sandbox_os={node.os_name}{pinned}")
    lines += ["", "[gpu_nodes:vars]", *_node_vars(ctx), ""]
    if ctx.slurm and nodes:
        lines += [
            "# `gpuprov sandbox up --slurm`: the first node runs slurmctld; every node runs slurmd. The",
            "# containers' cgroups are read-only, so the slurm role uses its container-safe settings.",
            "[slurm_controller]",
            nodes[0].name,
            "",
            "[all:vars]",
            "slurm_container_safe=true",
            "slurm_allow_no_gpu=true",
            "",
        ]
    return "\n".join(lines)


def _node_vars(ctx: InventoryContext) -> list[str]:
    """The [gpu_nodes:vars] lines: how to reach the nodes, and the roles' settings for containers and the
    sandbox's mirror."""
    # Host key checking stays on: the known_hosts file holds the keys gpuprov generated for each node.
    ssh_args = f"-o UserKnownHostsFile={ctx.known_hosts} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
    return [
        f"ansible_user={ctx.user}",
        f"ansible_ssh_private_key_file={ctx.private_key}",
        f"ansible_ssh_common_args={shlex.quote(ssh_args)}",
        "ansible_python_interpreter=/usr/bin/python3",
        f"gpuprov_known_hosts_file={ctx.known_hosts}",
        "gpuprov_sandbox=true",
        f"gpuprov_mirror_url={ctx.mirror_url}",
        f"gpuprov_mirror_key_fingerprint={ctx.mirror_key_fingerprint}",
        # The NVIDIA roles: the mirror's CUDA repositories and their key (file named like NVIDIA's
        # 3bf863cc.pub), metadata signatures checked too. Containers run the host's kernel (no headers to
        # install), have no GPUs, and cannot reboot: the roles report "reboot required" instead.
        f"nvidia_repository_base_url={SANDBOX_REPOS_URL}",  # the URL the stand-in cuda-keyring names too
        f"nvidia_repository_key_file={ctx.mirror_key_fingerprint[-8:].lower()}.pub",
        f"nvidia_repository_key_fingerprint={ctx.mirror_key_fingerprint}",
        "nvidia_repository_metadata_gpgcheck=true",
        "nvidia_driver_kernel_headers=false",
        "nvidia_driver_allow_no_gpu=true",
        "nvidia_driver_reboot=false",
        # network_tuning and python_env. A container cannot set global sysctls (vm.*), raise its memlock hard
        # limit or load kernel modules: the role reports what it could not apply instead of failing.
        # PyTorch (CPU build: no GPU) and pip packages come from the mirror's wheel index over plain HTTP;
        # conda from the mirror's stand-in Miniforge installer, checked by its sha256.
        "network_tuning_tolerate_unsettable=true",
        "network_tuning_rdma_load_modules=false",
        "python_env_allow_cpu_torch=true",
        # The mirror's wheel index holds cp311 wheels only: python_env keeps to 3.11 (debian12: its python3;
        # rocky9: AppStream's python3.11, the mirror's stand-in rpm; ubuntu-like nodes: pinned above).
        f"python_env_wheel_pythons={[PINNED_PYTHON]!r}",
        f"python_env_pytorch_index_url={ctx.mirror_url}/pypi/simple",
        f"python_env_pip_index_url={ctx.mirror_url}/pypi/simple",
        f"python_env_pip_trusted_hosts={[urllib.parse.urlsplit(ctx.mirror_url).hostname]!r}",
        f"python_env_conda_installer_url={ctx.mirror_url}/conda/{standins.CONDA_INSTALLER_NAME}",
        f"python_env_conda_installer_sha256={standins.conda_installer_sha256()}",
        *_image_vars(ctx),
        # container_runtime: the mirror's stand-in of NVIDIA's libnvidia-container repository and its key;
        # runc, because crun fails on this machine's hybrid cgroups. The storage driver stays the engines'
        # default (Docker's overlay2, Podman's overlay): each node keeps the engines' stores on docker volumes
        # (cluster.ENGINE_STORES), where the kernel's overlayfs works nested.
        f"container_runtime_toolkit_base_url={ctx.mirror_url}/libnvidia-container",
        f"container_runtime_toolkit_key_fingerprint={ctx.mirror_key_fingerprint}",
        "container_runtime_oci_runtime=runc",
    ]


def _image_vars(ctx: InventoryContext) -> list[str]:
    """With `sandbox up --containers`: the registry the nodes trust and the PyTorch image it serves."""
    if not (ctx.registry and ctx.sandbox_image):
        return []
    return [f"gpuprov_sandbox_registry={ctx.registry}", f"gpuprov_sandbox_image={ctx.sandbox_image}"]


# The sandbox's compatibility lock, kept once in playbooks/vars/sandbox_lock.yml (the Molecule scenarios
# read the same file): versions whose stand-in packages the mirror holds, PyTorch's CPU build.
SANDBOX_LOCK_FILE = ("vars", "sandbox_lock.yml")


def load_sandbox_lock() -> dict[str, str]:
    """The sandbox lock's gpu_stack, every value a string, in the file's order."""
    path = resources.data_dir("playbooks").joinpath(*SANDBOX_LOCK_FILE)
    stack = yaml.safe_load(path.read_text(encoding="utf-8"))["gpu_stack"]
    return {str(key): str(value) for key, value in stack.items()}


SANDBOX_LOCK = load_sandbox_lock()


def render_lock() -> str:
    """group_vars/all/gpu_stack.yml beside the sandbox inventory."""
    lines = ["# The sandbox's compatibility lock, written by `gpuprov sandbox up`.", "gpu_stack:"]
    lines += [f'  {key}: "{value}"' for key, value in SANDBOX_LOCK.items()]
    return "\n".join(lines) + "\n"


def render_known_hosts(entries: list[tuple[str, str]]) -> str:
    """known_hosts lines from (address, 'ssh-ed25519 AAAA...') pairs."""
    return "".join(f"{address} {key}\n" for address, key in entries)


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace path in one step so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
