"""The sandbox's image registry: Debian 12's docker-registry (CNCF distribution 2.8) in a container on the
sandbox network, served over TLS with the sandbox's own CA, which every node trusts.

The registry's certificate names the address Docker gives its container, known only once it runs: the
container starts waiting for its certificate, gpuprov signs one for that address and copies it in, and only
then does the registry start listening. Images reach it by an OCI push from this machine (skopeo).
"""

from __future__ import annotations

import io
import ssl
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gpuprov import console, hosttools, interrupts
from gpuprov.errors import GpuprovError
from gpuprov.sandbox import docker, registry_tls, service_images

PORT = 5000
ALIAS = "registry"  # its name on the sandbox network, which the certificate names too
CERT_DIR = "/etc/gpuprov-registry"
READY_TIMEOUT_S = 30
CA_FILE_NAME = "gpuprov-sandbox-registry.crt"

# The package's own /etc/docker/registry/config.yml with TLS added and deletes left off (a pushed tag stays).
CONFIG = f"""\
version: 0.1
log:
  fields:
    service: registry
storage:
  cache:
    blobdescriptor: inmemory
  filesystem:
    rootdirectory: /var/lib/docker-registry
http:
  addr: :{PORT}
  tls:
    certificate: {CERT_DIR}/server.crt
    key: {CERT_DIR}/server.key
  headers:
    X-Content-Type-Options: [nosniff]
"""
_WAIT_THEN_SERVE = (
    f"until [ -s {CERT_DIR}/server.key ]; do sleep 0.2; done; "
    "exec /usr/bin/docker-registry serve /etc/docker/registry/config.yml"
)
IMAGE = service_images.ServiceImage(
    name="registry",
    packages=("docker-registry",),
    files=(("/etc/docker/registry/config.yml", CONFIG),),
    changes=(f'CMD ["/bin/sh", "-c", "{_WAIT_THEN_SERVE}"]',),
)


def container_name(sandbox: str) -> str:
    return f"gpuprov-{sandbox}-registry"


def ensure_running(
    sandbox: str, network: str, labels: list[str], ca_dir: Path, created: list[str]
) -> tuple[str, bytes]:
    """Run the registry (once per sandbox) and return its host:port and the CA the nodes must trust.

    A registry whose certificate does not name its current address (a restarted container) is made anew.
    Names are appended to `created` before they exist, for the caller's rollback.
    """
    ca = registry_tls.load_or_create_ca(ca_dir, sandbox)
    name = container_name(sandbox)
    data = docker.inspect("container", name)
    if data is not None:
        address = _address(data, network)
        served = ca_dir / "server.crt"
        if (
            data["State"]["Running"]
            and address
            and served.is_file()
            and address in registry_tls.names_in(served.read_bytes())
        ):
            return f"{address}:{PORT}", ca.cert_pem
        docker.run("rm", "-f", name)
    image = service_images.ensure(IMAGE)
    console.step("Starting the image registry")
    created.append(name)
    label_args = [arg for label in labels for arg in ("--label", label)]
    docker.run(
        "run", "-d", "--name", name, "--hostname", ALIAS, *label_args,
        "--network", network, "--network-alias", ALIAS, image,
    )  # fmt: skip
    address = _address(docker.inspect("container", name) or {}, network)
    if not address:
        raise GpuprovError(
            f"the registry container {name} has no address on {network}; see `docker logs {name}`"
        )
    cert, key = registry_tls.server_certificate(ca, address, (ALIAS,))
    docker.run(
        "cp", "-", f"{name}:/", input=_tar({f"{CERT_DIR}/server.crt": cert, f"{CERT_DIR}/server.key": key})
    )
    (ca_dir / "server.crt").write_bytes(cert)
    _wait_until_serving(f"{address}:{PORT}", ca.cert_pem, name)
    return f"{address}:{PORT}", ca.cert_pem


def trust_on_node(container: str, registry: str, ca_pem: bytes) -> None:
    """The node trusts the registry: engines through their per-registry CA files (Podman reads
    /etc/containers/certs.d/HOST:PORT/ca.crt, Docker /etc/docker/certs.d/HOST:PORT/ca.crt), curl and
    everything else through the system's trust store."""
    host_port = {registry, f"{ALIAS}:{PORT}"}
    files = {
        f"/etc/{engine}/certs.d/{name}/ca.crt": ca_pem
        for engine in ("containers", "docker")
        for name in host_port
    }
    files[f"/usr/local/share/ca-certificates/{CA_FILE_NAME}"] = ca_pem
    docker.run("cp", "-", f"{container}:/", input=_tar(files))
    # The rocky-like nodes are Debian underneath: update-ca-certificates; a real EL host has update-ca-trust.
    docker.run(
        "exec", container, "sh", "-c",
        f"if command -v update-ca-trust >/dev/null; then cp /usr/local/share/ca-certificates/{CA_FILE_NAME} "
        "/etc/pki/ca-trust/source/anchors/ && update-ca-trust; else update-ca-certificates >/dev/null; fi",
    )  # fmt: skip


def ensure_push_tool() -> None:
    hosttools.ensure({"skopeo": "skopeo"}, "pushing the sandbox's PyTorch image")


def push(local_ref: str, registry: str, repository: str, tag: str, ca_pem: bytes) -> str:
    """Push a local Docker image to the registry (skopeo, verifying TLS with the CA); its manifest digest."""
    ensure_push_tool()
    target = f"{registry}/{repository}:{tag}"
    existing = manifest_digest(registry, repository, tag, ca_pem)
    if existing:
        return existing
    console.step(f"Pushing {local_ref} to {target}")
    with tempfile.TemporaryDirectory(prefix="gpuprov-push-") as tmp:
        certs = Path(tmp) / "certs"
        certs.mkdir()
        (certs / "ca.crt").write_bytes(ca_pem)
        digest_file = Path(tmp) / "digest"
        # gzip level 1: the push is mostly compressing 1.2 GB on this machine's 2 cores; level 1 took a fresh
        # `up --containers` from 59 s to 37 s here, and engines read any gzip level.
        cmd = ["skopeo", "copy", "--quiet", "--dest-compress-level", "1",
               "--dest-cert-dir", str(certs), "--digestfile", str(digest_file),
               f"docker-daemon:{local_ref}", f"docker://{target}"]  # fmt: skip
        console.detail("$ " + " ".join(cmd))
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, start_new_session=True)
        interrupts.check()
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise GpuprovError(f"pushing {local_ref} to the sandbox registry at {registry} failed: {last}")
        return digest_file.read_text().strip()


def manifest_digest(registry: str, repository: str, tag: str, ca_pem: bytes) -> str | None:
    """The digest the registry serves for repository:tag (Docker-Content-Digest), or None when it has none."""
    request = urllib.request.Request(
        f"https://{registry}/v2/{repository}/manifests/{tag}",
        method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=_context(ca_pem)) as answer:
            digest = answer.headers.get("Docker-Content-Digest")
            return str(digest) if digest else None
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise GpuprovError(
            f"the sandbox registry at {registry} answered {exc.code} for {repository}:{tag}"
        ) from None


def _wait_until_serving(registry: str, ca_pem: bytes, container: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"https://{registry}/v2/", timeout=2, context=_context(ca_pem)):
                return
        except (urllib.error.URLError, OSError) as exc:
            if time.monotonic() > deadline:
                raise GpuprovError(
                    f"the sandbox registry did not answer at https://{registry}/v2/ within "
                    f"{READY_TIMEOUT_S} s ({exc}); see `docker logs {container}`"
                ) from None
            interrupts.check()
            time.sleep(0.2)


def _context(ca_pem: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca_pem.decode())


def _address(data: dict[str, Any], network: str) -> str | None:
    networks = data.get("NetworkSettings", {}).get("Networks", {})
    found = (networks.get(network) or {}).get("IPAddress")
    return str(found) if found else None


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        made: set[str] = set()
        for path, data in files.items():
            parts = path.strip("/").split("/")
            for depth in range(1, len(parts)):
                directory = "/".join(parts[:depth])
                if directory not in made:
                    made.add(directory)
                    info = tarfile.TarInfo(directory)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
                    tar.addfile(info)
            info = tarfile.TarInfo("/".join(parts))
            info.size, info.mtime = len(data), now
            info.mode = 0o600 if path.endswith(".key") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
