"""`gpuprov sandbox up / down / inventory`: a local cluster of containers standing in for GPU servers.

Docker labels are the source of truth for what a sandbox owns: every container and network it makes
carries `gpuprov.sandbox=NAME`, so `down` removes exactly those, and anything with the same name but
without the label is someone else's and is never touched.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tarfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpuprov import console, hosts, interrupts, paths, ssh
from gpuprov.errors import BadInput, Conflict, GpuprovError
from gpuprov.sandbox import (
    debian_archive,
    docker,
    etc_hosts,
    images,
    inventory,
    keys,
    mirror,
    pytorch_image,
    registry,
    rocky_python,
    service_images,
)
from gpuprov.sandbox.spec import validate_name, validate_node_count

LABEL = "gpuprov.sandbox"
ROLE_LABEL = "gpuprov.role"
OS_LABEL = "gpuprov.os"
MIRROR_HASH_LABEL = mirror.SERVED_LABEL
STATE_LABEL = "gpuprov.state"  # the directory holding the sandbox's files (its login key, its inventory)
DEFAULT_NODES = 2
DEFAULT_OS = "debian12"
STATE_ROOM_MB = 10  # a sandbox's state: its login key and inventory (kB); and the runs made on it
USER = "gpuprov"
USER_UID = 1000
SSH_READY_TIMEOUT_S = 90
MIRROR_READY_TIMEOUT_S = 30
ADDRESS_TIMEOUT_S = 20
# A container engine inside a node sets `--ulimit memlock=-1` for its containers (NCCL, RDMA), which raises
# a hard limit: only CAP_SYS_RESOURCE may. Docker can grant it only where this machine's own bounding set
# has it (a build machine that is itself a container may not: then runc fails with "unable to apply caps").
# Given here, not in images.RUN_ARGS, so the node images keep their content hash (images.py is hashed).
CAP_SYS_RESOURCE = 24
# Where the engines nested in a node keep their images: each on a docker volume of its own (ext4 on this
# machine's disk), because the kernel's overlayfs takes no upper or work directory on the node's own overlay
# root. There Docker's overlay2 and Podman's overlay work as on a real host, instead of vfs, which copies the
# whole image for every container. One volume per path: Docker 20.10 mounts no sub-path of a volume.
ENGINE_STORES: dict[str, str] = {"docker": "/var/lib/docker", "containers": "/var/lib/containers"}


@dataclass(frozen=True)
class Node:
    name: str  # inventory name and hostname, e.g. "node1"
    index: int
    os_name: str
    container: str
    running: bool


@dataclass(frozen=True)
class SandboxFiles:
    """The files a sandbox keeps on this machine; `down` removes the whole directory."""

    root: Path

    @property
    def inventory(self) -> Path:
        return self.root / "inventory.ini"

    @property
    def lock(self) -> Path:
        return self.root / "group_vars" / "all" / "gpu_stack.yml"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def client_key(self) -> Path:
        return self.root / "id_ed25519"

    def host_key_pub(self, node: str) -> Path:
        return self.root / "hostkeys" / f"{node}.pub"


def files_for(name: str) -> SandboxFiles:
    return SandboxFiles(paths.state_dir() / "sandboxes" / name)


def container_name(sandbox: str, node: str) -> str:
    return f"gpuprov-{sandbox}-{node}"


def network_name(sandbox: str) -> str:
    return f"gpuprov-{sandbox}"


def mirror_container_name(sandbox: str) -> str:
    return f"gpuprov-{sandbox}-mirror"


def engine_volume_name(sandbox: str, node: str, store: str) -> str:
    """The docker volume holding a node's engine store (store: a key of ENGINE_STORES)."""
    return f"{container_name(sandbox, node)}-{store}"


# ----- input ----------------------------------------------------------------------------------------


def validate_slurm_oses(os_names: list[str]) -> None:
    """Only the debian12 nodes can install real Slurm (the mirror's copy of Debian's packages)."""
    others = sorted({name for name in os_names if name not in debian_archive.NODE_OSES})
    if others:
        raise BadInput(
            f"--slurm needs debian12 nodes only, and this sandbox would have {', '.join(others)} "
            "(the Ubuntu and Rocky stand-ins cannot get real Slurm packages here); use --os debian12"
        )


# ----- what exists ----------------------------------------------------------------------------------


def existing_nodes(sandbox: str) -> list[Node]:
    proc = docker.run(
        "ps", "-a", "--no-trunc",
        "--filter", f"label={LABEL}={sandbox}", "--filter", f"label={ROLE_LABEL}=node",
        "--format", "{{json .}}",
    )  # fmt: skip
    nodes = []
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        labels = dict(item.split("=", 1) for item in row["Labels"].split(",") if "=" in item)
        node_name = row["Names"].removeprefix(f"gpuprov-{sandbox}-")
        index = int(node_name.removeprefix("node"))
        nodes.append(
            Node(node_name, index, labels.get(OS_LABEL, "?"), row["Names"], row["State"] == "running")
        )
    return sorted(nodes, key=lambda n: n.index)


def _label(kind: str, object_name: str, label: str) -> str | None:
    """A label of a docker object: "" when the object has no such label, None when there is no object."""
    data = docker.inspect(kind, object_name)
    if data is None:
        return None
    labels = (data.get("Config") or data).get("Labels") or {}
    return str(labels.get(label, ""))


def _owner(kind: str, object_name: str) -> str | None:
    """The sandbox label of a docker object, "" for a foreign one, None when there is none."""
    return _label(kind, object_name, LABEL)


def _state_of(kind: str, object_name: str) -> str | None:
    """The state dir a docker object of a sandbox was made from; "" when it has no such label."""
    return _label(kind, object_name, STATE_LABEL)


def _refuse_other_state_dir(sandbox: str, current: list[Node], files: SandboxFiles) -> None:
    """A sandbox made from another state dir (another GPUPROV_STATE_DIR) is not this one's to change.

    Its nodes accept only that state dir's login key; taking them over would write a new key to them and
    lock out the inventory the other state dir holds. A sandbox of an older gpuprov carries no state label:
    it is this state dir's when its login key is here."""
    mine = str(files.root.resolve())
    owners = [_state_of("container", node.container) for node in current]
    owners.append(_state_of("network", network_name(sandbox)))
    for owner in owners:
        if owner is None or owner == mine or (owner == "" and files.client_key.is_file()):
            continue
        where = f" ({owner})" if owner else ""
        raise Conflict(
            f"sandbox {sandbox!r} exists but was made from another state dir{where}, which holds its login "
            f"key and inventory; run this with that GPUPROV_STATE_DIR, or choose another --name "
            f"(`gpuprov sandbox down --name {sandbox}` removes it for everyone)"
        )


def _refuse_foreign(sandbox: str, kind: str, object_name: str) -> None:
    owner = _owner(kind, object_name)
    if owner is not None and owner != sandbox:
        whose = f"sandbox {owner!r}" if owner else "something other than gpuprov"
        raise Conflict(
            f"a docker {kind} named {object_name!r} already exists and belongs to {whose}; "
            f"remove it or choose another name with --name"
        )


# ----- up -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    keep: list[Node]
    add: list[tuple[int, str]]  # (index, os) of nodes to create


def plan(sandbox: str, current: list[Node], nodes: int | None, os_list: list[str] | None) -> Plan:
    """Decide which nodes to create. Node i runs os_list[(i-1) % len], so `up` is declarative:
    asking again for what exists changes nothing, and a longer --nodes adds nodes."""
    target = nodes if nodes is not None else (len(current) or DEFAULT_NODES)
    validate_node_count(target)
    if len(current) > target:
        raise BadInput(
            f"sandbox {sandbox!r} has {len(current)} nodes; it does not shrink to {target}: "
            f"run `gpuprov sandbox down --name {sandbox}` first"
        )
    chosen = os_list or [DEFAULT_OS]
    by_index = {node.index: node for node in current}
    for node in current:
        wanted = chosen[(node.index - 1) % len(chosen)]
        if os_list is not None and node.os_name != wanted:
            raise BadInput(
                f"sandbox {sandbox!r} already has {node.name} running {node.os_name}, not {wanted}; "
                f"give --os in node order (e.g. --os {','.join(n.os_name for n in current)},...) "
                f"or run `gpuprov sandbox down --name {sandbox}` first"
            )
    add = [(i, chosen[(i - 1) % len(chosen)]) for i in range(1, target + 1) if i not in by_index]
    return Plan(keep=current, add=add)


class _Rollback:
    """Remembers what an `up` is creating so a failure or Ctrl-C removes exactly that.

    Names are recorded before the docker command that creates them runs, so nothing can exist
    that the undo step does not know of; removing a name that was never created is harmless.
    """

    def __init__(self, sandbox: str, new_sandbox: bool, state_dir: Path) -> None:
        self.sandbox = sandbox
        self.new_sandbox = new_sandbox
        self.state_dir = state_dir
        self.containers: list[str] = []
        self.volumes: list[str] = []
        self.network: str | None = None

    def undo(self) -> None:
        containers = list(self.containers)
        volumes = list(self.volumes)
        networks = [self.network] if self.network else []
        if self.new_sandbox:
            # Everything labelled with a sandbox that did not exist before this run is this run's.
            containers += docker.run("ps", "-aq", "--filter", f"label={LABEL}={self.sandbox}").stdout.split()
            volumes += _labelled("volume", self.sandbox)
            networks += _labelled("network", self.sandbox)
        if containers:
            docker.run("rm", "-f", *containers, check=False)
        if volumes:  # after the containers: docker removes no volume a container still uses
            docker.run("volume", "rm", "-f", *volumes, check=False)
        if networks:
            docker.run("network", "rm", *networks, check=False)
        if self.new_sandbox:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def up(
    sandbox: str, nodes: int | None, os_list: list[str] | None, slurm: bool = False, containers: bool = False
) -> Path:
    """Start (or extend) the sandbox and return the path of its inventory; slurm=True writes it for a
    Slurm cluster (see inventory.render); containers=True adds the image registry and the PyTorch image
    (kept on later `up`s of the same sandbox, with or without it)."""
    validate_name(sandbox)
    if nodes is not None:
        validate_node_count(nodes)
    files = files_for(sandbox)
    paths.writable_state_dir("sandbox up", need_mb=STATE_ROOM_MB)  # keys, inventory: before any container
    docker.ensure_engine()
    current = existing_nodes(sandbox)
    the_plan = plan(sandbox, current, nodes, os_list)
    if slurm:
        validate_slurm_oses([*(n.os_name for n in the_plan.keep), *(os_name for _, os_name in the_plan.add)])
    for index, _ in the_plan.add:
        _refuse_foreign(sandbox, "container", container_name(sandbox, f"node{index}"))
        for store in ENGINE_STORES:
            _refuse_foreign(sandbox, "volume", engine_volume_name(sandbox, f"node{index}", store))
    _refuse_foreign(sandbox, "network", network_name(sandbox))
    _refuse_foreign(sandbox, "container", mirror_container_name(sandbox))
    _refuse_foreign(sandbox, "container", registry.container_name(sandbox))
    _refuse_other_state_dir(sandbox, current, files)
    containers = containers or docker.inspect("container", registry.container_name(sandbox)) is not None

    if not the_plan.add and current and all(node.running for node in current):
        console.info(
            f"Sandbox {sandbox!r} is already up with {len(current)} nodes "
            f"({', '.join(n.os_name for n in current)}); nothing to change."
        )
    started = time.monotonic()
    # Caches first: they are written atomically, so an interrupt there leaves nothing to undo.
    os_needed = sorted({os_name for _, os_name in the_plan.add} | {DEFAULT_OS})
    image_refs, content = _ensure_caches(os_needed)
    torch_image = _container_images(content) if containers else None

    rollback = _Rollback(sandbox, new_sandbox=not current and not files.root.exists(), state_dir=files.root)
    try:
        with interrupts.deferred():
            _bring_up(sandbox, the_plan, files, image_refs, content, rollback, slurm, torch_image)
    except BaseException:
        console.warning(f"sandbox {sandbox!r} did not come up; removing what this run created")
        with interrupts.shielded(), contextlib.suppress(GpuprovError):
            rollback.undo()
        raise
    console.success(
        f"Sandbox {sandbox!r} is up in {time.monotonic() - started:.1f} s; inventory: {files.inventory}"
    )
    return files.inventory


def _ensure_caches(os_needed: list[str]) -> tuple[dict[str, str], mirror.MirrorContent]:
    """The node images and the package mirror content, built side by side where missing: on a first `up`
    the image build mostly waits on Debian's archive and on `docker import` while the mirror's package builds
    use the CPU, so together they take about as long as the longer one.

    The images are built in this (the main) thread: their build commands run in sessions of their own, which
    only this thread stops on Ctrl-C. The mirror's commands share the terminal's process group, so Ctrl-C
    stops them in the worker too. A machine that cannot build images is refused before the mirror starts."""
    docker.ensure_engine()
    if any(not docker.image_exists(images.image_ref(name)) for name in os_needed):
        images._check_build_host()
    with ThreadPoolExecutor(max_workers=1) as mirror_builder:
        content = mirror_builder.submit(mirror.ensure_mirror_content)
        refs = {name: images.ensure_image(name) for name in os_needed}
        return refs, content.result()


def _bring_up(
    sandbox: str,
    the_plan: Plan,
    files: SandboxFiles,
    image_refs: dict[str, str],
    content: mirror.MirrorContent,
    rollback: _Rollback,
    slurm: bool,
    torch_image: str | None = None,
) -> None:
    client = keys.load_or_create_client_key(files.client_key, f"gpuprov-sandbox-{sandbox}")

    net = network_name(sandbox)
    if docker.inspect("network", net) is None:
        rollback.network = net
        docker.run("network", "create", "--label", f"{LABEL}={sandbox}", "--label", _state_label(files), net)

    mirror_address = _ensure_mirror(sandbox, image_refs[DEFAULT_OS], content, rollback, files)

    if the_plan.add:
        console.step(
            f"Starting {len(the_plan.add)} node(s): "
            + ", ".join(f"node{index} ({os_name})" for index, os_name in the_plan.add)
        )

    def create(item: tuple[int, str]) -> None:
        index, os_name = item
        _create_node(sandbox, index, os_name, image_refs[os_name], client, files, rollback, content)

    ssh.values(ssh.fan_out(the_plan.add, create, max_parallel=8))
    for node in the_plan.keep:
        if not node.running:
            console.step(f"Starting stopped node {node.name}")
            docker.run("start", node.container)
            etc_hosts.write(node.container, node.os_name, node.name)
        _authorize(node.container, client)

    all_nodes = existing_nodes(sandbox)
    addresses = {node.name: _address(node.container, net) for node in all_nodes}
    host_keys = {node.name: _host_key(files, node) for node in all_nodes}
    inventory.write_atomic(
        files.known_hosts,
        inventory.render_known_hosts([(addresses[n.name], host_keys[n.name]) for n in all_nodes]),
    )
    console.step("Waiting for SSH on every node (host keys checked)")
    ssh.values(
        ssh.fan_out(all_nodes, lambda n: _wait_for_ssh(n.name, addresses[n.name], files), max_parallel=8)
    )
    served = _serve_image(sandbox, files, all_nodes, torch_image, rollback) if torch_image else None
    ctx = inventory.InventoryContext(
        sandbox=sandbox,
        user=USER,
        private_key=files.client_key,
        known_hosts=files.known_hosts,
        mirror_url=f"http://{mirror_address}",
        mirror_key_fingerprint=content.key_fingerprint,
        slurm=slurm,
        registry=served[0] if served else None,
        sandbox_image=served[1] if served else None,
    )
    entries = [inventory.NodeEntry(n.name, addresses[n.name], n.os_name) for n in all_nodes]
    inventory.write_atomic(files.lock, inventory.render_lock())
    inventory.write_atomic(files.inventory, inventory.render(entries, ctx))
    for entry in entries:
        console.info(f"  {entry.name:<8} {entry.os_name:<12} {entry.address}")


def _container_images(content: mirror.MirrorContent) -> str:
    """Build (once per machine) the registry's and the PyTorch image, and make sure skopeo is here: caches,
    so they come before anything an interrupt would have to undo. Returns the PyTorch image's local ref."""
    service_images.ensure(registry.IMAGE)
    registry.ensure_push_tool()
    return service_images.ensure(pytorch_image.spec(content))


def _serve_image(
    sandbox: str, files: SandboxFiles, nodes: list[Node], torch_image: str, rollback: _Rollback
) -> tuple[str, str]:
    """Run the registry, make every node trust it, push the PyTorch image; (registry, image by digest)."""
    labels = [f"{LABEL}={sandbox}", f"{ROLE_LABEL}=registry", _state_label(files)]
    address, ca_pem = registry.ensure_running(
        sandbox, network_name(sandbox), labels, files.root / "registry", rollback.containers
    )
    ssh.values(
        ssh.fan_out(nodes, lambda n: registry.trust_on_node(n.container, address, ca_pem), max_parallel=8)
    )
    tag = pytorch_image.tag(torch_image)
    digest = registry.push(torch_image, address, pytorch_image.REPOSITORY, tag, ca_pem)
    return address, f"{address}/{pytorch_image.REPOSITORY}:{tag}@{digest}"


def _state_label(files: SandboxFiles) -> str:
    return f"{STATE_LABEL}={files.root.resolve()}"


def _ensure_mirror(
    sandbox: str, image: str, content: mirror.MirrorContent, rollback: _Rollback, files: SandboxFiles
) -> str:
    """Run the package mirror container (re-created when the mirror content changed); return its address."""
    name = mirror_container_name(sandbox)
    net = network_name(sandbox)
    data = docker.inspect("container", name)
    if data is not None:
        labels = data["Config"].get("Labels") or {}
        if labels.get(MIRROR_HASH_LABEL) != str(content.root):
            docker.run("rm", "-f", name)
            data = None
        elif not data["State"]["Running"]:
            docker.run("start", name)
    if data is None:
        console.step("Starting the package mirror")
        rollback.containers.append(name)
        docker.run(
            "run", "-d", "--name", name, "--hostname", "mirror",
            "--label", f"{LABEL}={sandbox}", "--label", f"{ROLE_LABEL}=mirror",
            "--label", _state_label(files),
            "--label", f"{MIRROR_HASH_LABEL}={content.root}",
            "--network", net, "--network-alias", "mirror",
            "-v", f"{content.root}:/srv/mirror:ro",
            image, "python3", "-m", "http.server", "80", "--bind", "0.0.0.0", "--directory", "/srv/mirror",
        )  # fmt: skip
    address = _address(name, net)
    _wait_for_http(f"http://{address}/keys/gpuprov-sandbox.asc")
    return address


def node_capabilities(status: Path = Path("/proc/self/status")) -> tuple[str, ...]:
    """The capabilities nodes get beyond images.RUN_ARGS: CAP_SYS_RESOURCE where this machine can grant it."""
    bounding = next(
        (line.split()[1] for line in status.read_text().splitlines() if line.startswith("CapBnd:")), "0"
    )
    return ("--cap-add", "SYS_RESOURCE") if int(bounding, 16) >> CAP_SYS_RESOURCE & 1 else ()


def _create_node(
    sandbox: str,
    index: int,
    os_name: str,
    image: str,
    client: keys.KeyPair,
    files: SandboxFiles,
    rollback: _Rollback,
    content: mirror.MirrorContent,
) -> None:
    node = f"node{index}"
    name = container_name(sandbox, node)
    stores = _engine_store_mounts(sandbox, node, files, rollback)
    rollback.containers.append(name)
    docker.run(
        "create", "--name", name, "--hostname", node,
        "--label", f"{LABEL}={sandbox}", "--label", f"{ROLE_LABEL}=node", "--label", f"{OS_LABEL}={os_name}",
        "--label", _state_label(files),
        "--network", network_name(sandbox), *images.RUN_ARGS, *node_capabilities(), *stores, image,
    )  # fmt: skip
    host_key = keys.generate(f"root@{node}")
    extra: dict[str, bytes] = {}
    if os_name in debian_archive.NODE_OSES:
        extra[debian_archive.NODE_SOURCE_FILE] = debian_archive.node_source().encode()
        extra[debian_archive.NODE_KEY_FILE] = (content.root / mirror.KEY_FILE).read_bytes()
    if os_name in rocky_python.NODE_OSES:
        extra[rocky_python.NODE_REPO_FILE] = rocky_python.node_repo().encode()
        extra[rocky_python.NODE_KEY_FILE] = (content.root / mirror.KEY_FILE).read_bytes()
    docker.run("cp", "-a", "-", f"{name}:/", input=_node_files_tar(host_key, client, extra))
    files.host_key_pub(node).parent.mkdir(parents=True, exist_ok=True)
    files.host_key_pub(node).write_text(keys.public_key_fields(host_key.public_openssh) + "\n")
    docker.run("start", name)
    etc_hosts.write(name, os_name, node)


def _engine_store_mounts(sandbox: str, node: str, files: SandboxFiles, rollback: _Rollback) -> list[str]:
    """Create the node's engine store volumes (labelled, so `down` finds them); their `--mount` arguments."""
    mounts = []
    for store, path in ENGINE_STORES.items():
        volume = engine_volume_name(sandbox, node, store)
        rollback.volumes.append(volume)
        docker.run(
            "volume", "create", "--label", f"{LABEL}={sandbox}", "--label", _state_label(files), volume
        )
        mounts += ["--mount", f"type=volume,source={volume},target={path}"]
    return mounts


def _node_files_tar(
    host_key: keys.KeyPair, client: keys.KeyPair, extra: dict[str, bytes] | None = None
) -> bytes:
    """A tar of the per-node secrets (and extra files, 0644 root), extracted into the container before it
    first boots."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(path: str, data: bytes | None, mode: int, uid: int = 0) -> None:
            info = tarfile.TarInfo(path)
            info.mode, info.uid, info.gid, info.mtime = mode, uid, uid, now
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

        add("etc/ssh/ssh_host_ed25519_key", host_key.private_openssh, 0o600)
        add("etc/ssh/ssh_host_ed25519_key.pub", (host_key.public_openssh + "\n").encode(), 0o644)
        add(f"home/{USER}/.ssh", None, 0o700, USER_UID)
        add(f"home/{USER}/.ssh/authorized_keys", (client.public_openssh + "\n").encode(), 0o600, USER_UID)
        for path, data in (extra or {}).items():
            add(path, data, 0o644)
    return buf.getvalue()


def _authorize(container: str, client: keys.KeyPair) -> None:
    """Make sure an existing node accepts the sandbox's current client key."""
    docker.run("cp", "-a", "-", f"{container}:/", input=_authorized_keys_tar(client))


def _authorized_keys_tar(client: keys.KeyPair) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = (client.public_openssh + "\n").encode()
        info = tarfile.TarInfo(f"home/{USER}/.ssh/authorized_keys")
        info.mode, info.uid, info.gid, info.mtime, info.size = (
            0o600,
            USER_UID,
            USER_UID,
            time.time(),
            len(data),
        )
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _host_key(files: SandboxFiles, node: Node) -> str:
    """The node's public host key, from our record or, failing that, read through docker (not the network)."""
    path = files.host_key_pub(node.name)
    if path.is_file():
        return path.read_text().strip()
    proc = docker.run("exec", node.container, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
    key = keys.public_key_fields(proc.stdout.strip())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key + "\n")
    return key


def _address(container: str, net: str) -> str:
    """The container's address on the sandbox network; on a busy machine it can take a moment to appear."""
    deadline = time.monotonic() + ADDRESS_TIMEOUT_S
    while True:
        data = docker.inspect("container", container) or {}
        networks = data.get("NetworkSettings", {}).get("Networks", {})
        address = (networks.get(net) or {}).get("IPAddress")
        if address:
            return str(address)
        state = data.get("State", {}).get("Status", "missing")
        if state not in ("created", "running") or time.monotonic() > deadline:
            raise GpuprovError(
                f"container {container} has no address on network {net} (it is {state}); "
                f"see `docker logs {container}`"
            )
        time.sleep(0.2)


def _wait_for_http(url: str) -> None:
    deadline = time.monotonic() + MIRROR_READY_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, OSError) as exc:
            if time.monotonic() > deadline:
                raise GpuprovError(
                    f"the package mirror did not answer at {url} within {MIRROR_READY_TIMEOUT_S} s ({exc})"
                ) from None
            interrupts.check()
            time.sleep(0.2)


def _wait_for_ssh(node: str, address: str, files: SandboxFiles) -> None:
    """Log in as the sandbox user with strict host key checking (the sandbox's known_hosts, written before)
    and check that sudo works."""
    host = hosts.Host(node, address, 22, USER, files.client_key, files.known_hosts)
    deadline = time.monotonic() + SSH_READY_TIMEOUT_S
    last_error = "no answer"
    while time.monotonic() < deadline:
        try:
            client = ssh.connect(host, timeout=3)
            try:
                if ssh.run(client, "sudo -n true && echo ready", timeout=10).stdout.strip() == "ready":
                    return
                last_error = "sudo did not work for the sandbox user"
            finally:
                client.close()
        except ssh.SessionLost as exc:
            last_error = str(exc.cause) or type(exc.cause).__name__
        except (ssh.Unreachable, ssh.HostKeyProblem) as exc:
            last_error = ssh.without_label(exc, host)
        interrupts.check()
        time.sleep(0.3)
    raise GpuprovError(f"{node} ({address}) did not accept SSH within {SSH_READY_TIMEOUT_S} s: {last_error}")


# ----- down / inventory -------------------------------------------------------------------------------


def down(sandbox: str) -> bool:
    """Remove every container, network and file of the sandbox; False when there was nothing."""
    validate_name(sandbox)
    docker.ensure_engine()
    proc = docker.run("ps", "-aq", "--filter", f"label={LABEL}={sandbox}")
    container_ids = proc.stdout.split()
    volumes = _labelled("volume", sandbox)
    nets = _labelled("network", sandbox)
    files = files_for(sandbox)
    if not container_ids and not volumes and not nets and not files.root.exists():
        return False
    if container_ids:
        docker.run("rm", "-f", "-v", *container_ids)
    if volumes:
        docker.run("volume", "rm", "-f", *volumes)
    if nets:
        docker.run("network", "rm", *nets)
    shutil.rmtree(files.root, ignore_errors=True)
    return True


def _labelled(kind: str, sandbox: str) -> list[str]:
    """The names of the sandbox's docker objects of a kind ("volume", "network")."""
    proc = docker.run(kind, "ls", "-q", "--filter", f"label={LABEL}={sandbox}")
    return proc.stdout.split()


def inventory_path(sandbox: str) -> Path:
    validate_name(sandbox)
    path = files_for(sandbox).inventory
    if not path.is_file():
        raise BadInput(
            f"no sandbox named {sandbox!r} is up; start one with `gpuprov sandbox up --name {sandbox}`"
        )
    return path
