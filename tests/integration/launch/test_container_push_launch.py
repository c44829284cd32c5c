"""`gpuprov launch --image IMAGE --push-image` end to end on the 2-node `--containers` sandbox (the engine of
the container_runtime role, as test_container_launch.py): node1 has the image from the sandbox registry,
node2 has none; the launch streams this machine's copy to node2 only, then the ranks train across both
nodes inside containers of that image, and nothing is left behind."""

from __future__ import annotations

import subprocess

import pytest

from gpuprov import hosts
from tests.integration.conftest import Sandbox
from tests.integration.launch.conftest import REPO, container, docker_exec, gp

pytestmark = pytest.mark.integration

EXAMPLE = str(REPO / "examples" / "train_ddp.py")
ENGINE = "command -v docker >/dev/null && e=docker || e='sudo -n podman'; "


def on_engine(sandbox: Sandbox, node: str, command: str) -> subprocess.CompletedProcess[str]:
    return docker_exec(container(sandbox, node), "sh", "-c", ENGINE + command)


def local_reference(image_id: str) -> str:
    """A name of image_id in this machine's Docker (the sandbox built the image here, then pushed it)."""
    tags = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{join .RepoTags \" \"}}", image_id],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert tags, f"this machine's Docker has {image_id} under no name"
    return tags[0]


def test_push_image_streams_to_the_host_without_it_and_trains(container_nodes: Sandbox) -> None:
    reference = str(hosts.load(container_nodes.inventory).hosts[0].vars["gpuprov_sandbox_image"])
    pulled = on_engine(container_nodes, "node1", f"$e pull -q {reference} >/dev/null && "
                       f"$e image inspect --format '{{{{.Id}}}}' {reference}")  # fmt: skip
    assert pulled.returncode == 0, pulled.stderr
    image_id = pulled.stdout.strip()
    # node2 without it (an earlier test may have pulled or loaded it: every name of the ID goes).
    on_engine(container_nodes, "node2", f"$e image rm -f {image_id} >/dev/null 2>&1; true")
    assert on_engine(container_nodes, "node2", f"$e image inspect {image_id}").returncode != 0
    local = local_reference(image_id)
    done = gp(container_nodes, "-v", "launch", "--image", local, "--push-image", "--nodes", "2", EXAMPLE,
              "--", "--epochs", "1", timeout=1200)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "all-reduce agreement OK: world 2, sum of ranks 1 (expected 1)" in done.stdout
    assert "had: node1" in done.stderr and "loaded: node2" in done.stderr, done.stderr
    # node2 got the image by the push (same ID), node1 kept its own.
    for node in ("node1", "node2"):
        found = on_engine(container_nodes, node, f"$e image inspect --format '{{{{.Id}}}}' {image_id}")
        assert found.stdout.strip() == image_id, f"{node}: {found.stdout}{found.stderr}"
        names = on_engine(container_nodes, node, "$e ps -a --format '{{.Names}}'").stdout.split()
        assert not [n for n in names if n.startswith("gpuprov-")], f"{node} kept {names}"
