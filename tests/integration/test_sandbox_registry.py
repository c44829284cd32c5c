"""`gpuprov sandbox up --containers`: a real registry (Debian's docker-registry 2.8) serves the sandbox's
PyTorch image over TLS, and the nodes trust it; checked from this machine and from a node with curl."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gpuprov.sandbox import cluster, registry
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration

MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def _var(sandbox: Sandbox, name: str) -> str:
    found = re.search(rf"^{name}=(\S+)$", sandbox.inventory.read_text(), re.MULTILINE)
    assert found, f"{name} not in {sandbox.inventory}"
    return found.group(1)


def _ca(sandbox: Sandbox) -> Path:
    return Path(sandbox.env["GPUPROV_STATE_DIR"]) / "sandboxes" / sandbox.name / "registry" / "ca.crt"


def test_the_inventory_names_the_image_by_digest_on_the_registry(containers_sandbox: Sandbox) -> None:
    registry_address = _var(containers_sandbox, "gpuprov_sandbox_registry")
    image = _var(containers_sandbox, "gpuprov_sandbox_image")
    assert re.fullmatch(
        rf"{re.escape(registry_address)}/gpuprov/pytorch-cpu:2\.13\.0-cpu-[0-9a-f]{{12}}@sha256:[0-9a-f]{{64}}",
        image,
    ), image


def test_this_machine_pulls_the_manifest_by_digest_over_tls_with_the_sandbox_ca(
    containers_sandbox: Sandbox,
) -> None:
    image = _var(containers_sandbox, "gpuprov_sandbox_image")
    host, rest = image.split("/", 1)
    repository, digest = rest.split(":", 1)[0], image.rsplit("@", 1)[1]
    context = ssl.create_default_context(cafile=str(_ca(containers_sandbox)))
    request = urllib.request.Request(
        f"https://{host}/v2/{repository}/manifests/{digest}", headers={"Accept": MANIFEST}
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        body = answer.read()
        assert answer.headers["Docker-Content-Digest"] == digest
    manifest = json.loads(body)
    assert manifest["mediaType"] == MANIFEST and manifest["layers"], manifest
    # Without the sandbox CA the certificate is not trusted: TLS is real, not switched off.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"https://{host}/v2/", timeout=10, context=ssl.create_default_context())


def test_a_node_trusts_the_registry(containers_sandbox: Sandbox) -> None:
    image = _var(containers_sandbox, "gpuprov_sandbox_image")
    host, rest = image.split("/", 1)
    repository, digest = rest.split(":", 1)[0], image.rsplit("@", 1)[1]
    node = next(c for c in containers_sandbox.containers() if _role(c) == "node")
    url = f"https://{host}/v2/{repository}/manifests/{digest}"
    out = _exec(node, "curl", "-fsS", "-o", "/dev/null", "-D", "-", "-H", f"Accept: {MANIFEST}", url)
    assert f"docker-content-digest: {digest}" in out.lower(), out
    for engine in ("containers", "docker"):  # where Podman and Docker look for a registry's CA
        _exec(node, "test", "-s", f"/etc/{engine}/certs.d/{host}/ca.crt")
    # CAP_SYS_RESOURCE (24), which --ulimit memlock=-1 needs, wherever this machine can grant it.
    node_has = int(_exec(node, "sh", "-c", "grep CapBnd /proc/1/status | cut -f2"), 16) >> 24 & 1
    assert node_has == bool(cluster.node_capabilities())


def test_up_again_keeps_the_registry_and_the_same_digest(containers_sandbox: Sandbox) -> None:
    before = _var(containers_sandbox, "gpuprov_sandbox_image")
    containers_sandbox.gpuprov("sandbox", "up")  # without --containers: the registry is kept
    assert _var(containers_sandbox, "gpuprov_sandbox_image") == before
    assert registry.container_name(containers_sandbox.name) in _names(containers_sandbox)


def _role(container: str) -> str:
    return subprocess.run(
        ["docker", "inspect", "-f", '{{index .Config.Labels "gpuprov.role"}}', container],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def _names(sandbox: Sandbox) -> list[str]:
    return [
        subprocess.run(
            ["docker", "inspect", "-f", "{{.Name}}", c], capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .lstrip("/")
        for c in sandbox.containers()
    ]


def _exec(container: str, *cmd: str) -> str:
    proc = subprocess.run(["docker", "exec", container, *cmd], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{' '.join(cmd)}: {proc.stderr}"
    return proc.stdout
