"""--push-image against real engines: the host helper with this machine's Docker Engine, and push_image over
real SSH into Debian 12's Podman inside sandbox nodes (a full disk, Ctrl-C, nothing half-loaded left).

The nodes' Podman comes from the sandbox mirror (Debian's podman package, which the container_runtime
work adds to it); where the mirror does not carry it yet, the SSH tests skip and say so.
GPUPROV_TEST_PUSH_INVENTORY names the inventory of a sandbox whose nodes already have Podman (a developer's
by hand), used instead of starting one.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.errors import ExitCode
from gpuprov.launch import image_push
from gpuprov.onhost import text
from tests.integration.conftest import Sandbox, unique_name


@dataclass(frozen=True)
class PodmanNodes:
    sandbox: str  # the sandbox's name (its node containers are gpuprov-SANDBOX-NODE)
    inventory: Path
    hosts: list[hosts.Host]


def sudo_podman(host: hosts.Host) -> tuple[str, ...]:
    """The sandbox's SSH user (gpuprov) runs the engine as root through sudo, as on a real host."""
    return ("sudo", "-n", "podman")


def make_image(tag: str, megabytes: int, workdir: Path) -> str:
    """A one-layer image in this machine's Docker Engine (random bytes: no compression helps); its ID."""
    root = workdir / tag.replace("/", "_").replace(":", "_")
    root.mkdir()
    (root / "blob").write_bytes(os.urandom(megabytes * 1_000_000))
    (root / "hello").write_text(tag + "\n")
    tar = subprocess.run(["tar", "-C", str(root), "-c", "."], capture_output=True, check=True).stdout
    subprocess.run(["docker", "import", "-", tag], input=tar, capture_output=True, check=True)
    return subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True, check=True
    ).stdout.strip()


def remove_image(tag: str) -> None:
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


# ----- the host helper with this machine's Docker Engine -------------------------------------------------


def docker_layers() -> int:
    return len(list(Path("/var/lib/docker/image/overlay2/layerdb/sha256").iterdir()))


@pytest.fixture
def saved_image(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    tag = f"gpuprov-test/push-{unique_name('h')}:1"
    image_id = make_image(tag, 20, tmp_path)
    archive = tmp_path / "image.tar"
    subprocess.run(["docker", "save", "-o", str(archive), tag], check=True)
    remove_image(tag)
    yield image_id, archive
    remove_image(image_id)


def run_helper(
    image_id: str, archive: Path, keep: int | None, tag: str = ""
) -> subprocess.CompletedProcess[bytes]:
    """image_load.py as the host runs it, fed the header and the first `keep` bytes (None: all)."""
    data = archive.read_bytes()
    header = json.dumps({"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}).encode() + b"\n"
    stream = header + (data if keep is None else data[:keep])
    return subprocess.run(
        ["python3", "-c", text("image_load.py"), image_id, tag, "docker"],
        input=stream,
        capture_output=True,
        timeout=300,
        check=False,
    )


def test_docker_a_cut_stream_loads_nothing_and_a_whole_one_loads_once(saved_image: tuple[str, Path]) -> None:
    image_id, archive = saved_image
    layers = docker_layers()
    for keep in (
        archive.stat().st_size * 2 // 3,
        archive.stat().st_size - 100,
    ):  # inside a layer; in the tail
        cut = run_helper(image_id, archive, keep)
        assert cut.returncode == 1 and cut.stdout == b"need\n", cut
        assert b"the stream ended after" in cut.stderr
        assert docker_layers() == layers  # the load never saw the end of its input: no layer kept
        assert subprocess.run(["docker", "image", "inspect", image_id], capture_output=True).returncode == 1
    whole = run_helper(image_id, archive, None, tag="gpuprov-test/pushed:1")
    assert (whole.returncode, whole.stdout) == (0, b"need\nloaded\n"), whole
    tagged = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", "gpuprov-test/pushed:1"],
        capture_output=True,
        text=True,
    )
    assert tagged.stdout.strip() == image_id
    again = run_helper(image_id, archive, 0)
    assert (again.returncode, again.stdout) == (0, b"have\n")
    remove_image("gpuprov-test/pushed:1")


# ----- push_image over SSH into Podman in sandbox nodes --------------------------------------------------


def node(sandbox_name: str, name: str, script: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["docker", "exec", f"gpuprov-{sandbox_name}-{name}", "sh", "-ec", script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{name}: {script}: {proc.stdout}{proc.stderr}")
    return proc.stdout


def install_podman(sandbox_name: str, names: list[str]) -> None:
    """Debian's podman from the sandbox mirror, with its own default storage (overlay: the node keeps
    /var/lib/containers on a docker volume, where the kernel's overlayfs works nested)."""
    for name in names:
        if node(sandbox_name, name, "command -v podman || true").strip():
            continue
        found = node(sandbox_name, name, "apt-get update -qq && apt-cache policy podman", check=False)
        if "Candidate: (none)" in found or "Candidate" not in found:
            pytest.skip("the sandbox mirror has no podman package yet (the container_runtime work adds it)")
        node(sandbox_name, name, "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman")


@pytest.fixture(scope="module")
def podman_nodes(request: pytest.FixtureRequest) -> Iterator[PodmanNodes]:
    """Two sandbox nodes with Podman: the --image launch tests' nodes (the container_runtime role's Podman,
    session-scoped), or GPUPROV_TEST_PUSH_INVENTORY's."""
    given = os.environ.get("GPUPROV_TEST_PUSH_INVENTORY")
    if given:
        yield PodmanNodes(Path(given).parent.name, Path(given), hosts.load(given).hosts[:2])
        return
    sandbox: Sandbox = request.getfixturevalue("container_nodes")
    install_podman(sandbox.name, ["node1", "node2"])  # beside the role's Docker on debian12
    yield PodmanNodes(sandbox.name, sandbox.inventory, hosts.load(sandbox.inventory).hosts)


@pytest.fixture
def pushed_image(tmp_path: Path, podman_nodes: PodmanNodes) -> Iterator[tuple[str, str]]:
    """A 30 MB image in this machine's Docker Engine, absent from the nodes: (its tag, its ID)."""
    tag = f"gpuprov-test/push-{unique_name('s')}:1"
    image_id = make_image(tag, 30, tmp_path)
    yield tag, image_id
    remove_image(tag)
    for host in podman_nodes.hosts:
        node(podman_nodes.sandbox, host.name, f"podman rmi -f {image_id} >/dev/null 2>&1 || true")


def node_has(sandbox_name: str, name: str, image_id: str) -> bool:
    out = node(sandbox_name, name, f"podman image inspect --format '{{{{.Id}}}}' {image_id} || true")
    return out.strip() == image_id.removeprefix("sha256:")


def leftovers(sandbox_name: str, name: str) -> str:
    """What a stopped or failed push could leave on a node: temporary folders, a running load."""
    return node(
        sandbox_name,
        name,
        "ls -d /var/tmp/gpuprov-image-* /var/tmp/podman* 2>/dev/null || true; pgrep -a podman || true",
    )


def targets(host_list: list[hosts.Host]) -> list[image_push.HostTarget]:
    return [image_push.HostTarget(h) for h in host_list]


def test_push_loads_where_missing_and_skips_where_present(
    podman_nodes: PodmanNodes, pushed_image: tuple[str, str]
) -> None:
    sandbox_name, nodes = podman_nodes.sandbox, podman_nodes.hosts
    tag, image_id = pushed_image
    first = image_push.push_image(targets(nodes[:1]), tag, engine_for=sudo_podman)
    assert first.names("loaded") == [nodes[0].name] and first.image_id == image_id
    both = image_push.push_image(targets(nodes), tag, engine_for=sudo_podman)
    assert [(h.host, h.state) for h in both.hosts] == [(nodes[0].name, "had"), (nodes[1].name, "loaded")]
    assert all(node_has(sandbox_name, n.name, image_id) for n in nodes)
    again = image_push.push_image(targets(nodes), tag, engine_for=sudo_podman)
    assert again.names("had") == [n.name for n in nodes] and again.archive_bytes == 0


def test_a_full_disk_leaves_nothing_and_the_next_run_loads(
    podman_nodes: PodmanNodes, pushed_image: tuple[str, str]
) -> None:
    sandbox_name, nodes = podman_nodes.sandbox, podman_nodes.hosts
    tag, image_id = pushed_image
    name = nodes[0].name
    node(sandbox_name, name, "mount -t tmpfs -o size=10m tmpfs /var/tmp")  # Podman's copy of stdin goes there
    try:
        report = image_push.push_image(targets(nodes[:1]), tag, engine_for=sudo_podman)
    finally:
        node(sandbox_name, name, "umount /var/tmp")
    error = report.error()
    assert error is not None and error.exit_code == ExitCode.PREFLIGHT_FAILED
    assert f"({name}: podman load failed:" in error.message and "no space left on device" in error.message
    assert "\n" not in error.message
    assert not node_has(sandbox_name, name, image_id)
    assert leftovers(sandbox_name, name) == ""
    redo = image_push.push_image(targets(nodes[:1]), tag, engine_for=sudo_podman)
    assert redo.names("loaded") == [name]


DRIVER = """
import sys
from gpuprov import hosts
from gpuprov.errors import GpuprovError
from gpuprov.launch import image_push
inventory, tag = sys.argv[1], sys.argv[2]
chosen = [h for h in hosts.load(inventory).hosts if h.name in sys.argv[3:]]
try:
    image_push.push_image([image_push.HostTarget(h) for h in chosen], tag,
                          engine_for=lambda h: ("sudo", "-n", "podman"))
except GpuprovError as exc:
    print(exc.message, file=sys.stderr)
    sys.exit(exc.exit_code)
"""


def test_ctrl_c_stops_every_load_and_leaves_nothing(podman_nodes: PodmanNodes, tmp_path: Path) -> None:
    sandbox_name, nodes = podman_nodes.sandbox, podman_nodes.hosts
    tag = f"gpuprov-test/push-{unique_name('c')}:1"
    image_id = make_image(tag, 200, tmp_path)  # big enough to be caught while loading
    inventory = str(podman_nodes.inventory)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, inventory, tag, *(n.name for n in nodes)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while "podman load" not in node(sandbox_name, nodes[1].name, "pgrep -a podman || true"):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == ExitCode.INTERRUPTED, err
        lines = err.splitlines()
        assert lines[0].startswith("> Pushing ") and len(lines) == 2, err  # the step line, then one line
        assert lines[1].startswith("interrupted during the image push: stopped the push to 2 host(s)"), err
        for n in nodes:
            assert not node_has(sandbox_name, n.name, image_id)
            assert leftovers(sandbox_name, n.name) == ""
    finally:
        remove_image(tag)
