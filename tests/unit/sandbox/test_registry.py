"""The sandbox registry's pieces that need no Docker: its TLS, the files a node gets, the inventory lines,
and the recipes of its images."""

from __future__ import annotations

import io
import ssl
import stat
import tarfile
from pathlib import Path

import pytest
from cryptography import x509

from gpuprov.errors import GpuprovError
from gpuprov.sandbox import inventory, mirror, pytorch_image, registry, registry_tls, service_images


def test_the_ca_is_made_once_with_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    first = registry_tls.load_or_create_ca(tmp_path / "ca", "s1")
    assert stat.S_IMODE((tmp_path / "ca" / "ca.key").stat().st_mode) == 0o600
    again = registry_tls.load_or_create_ca(tmp_path / "ca", "s1")
    assert again.cert_pem == first.cert_pem
    cert = x509.load_pem_x509_certificate(first.cert_pem)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_the_server_certificate_names_the_address_and_alias_and_verifies_against_the_ca(
    tmp_path: Path,
) -> None:
    ca = registry_tls.load_or_create_ca(tmp_path, "s1")
    cert, key = registry_tls.server_certificate(ca, "172.18.0.5", ("registry",))
    assert registry_tls.names_in(cert) == {"172.18.0.5", "registry"}
    # A TLS client that trusts only the sandbox CA completes a handshake for the address (what curl and the
    # engines do), and refuses a name the certificate does not carry.
    (tmp_path / "server.crt").write_bytes(cert)
    (tmp_path / "server.key").write_bytes(key)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    client = ssl.create_default_context(cadata=ca.cert_pem.decode())
    _handshake(server, client, "172.18.0.5")
    _handshake(server, client, "registry")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, client, "172.18.0.6")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, ssl.create_default_context(), "172.18.0.5")  # the system's CAs do not know it


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, hostname: str) -> None:
    """A TLS handshake in memory; raises what the client raises."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError:
                    if name == "client":
                        raise
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("the handshake did not finish")


def test_a_node_gets_the_ca_where_podman_docker_and_the_system_look(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[tuple[str, ...], bytes | None]] = []
    monkeypatch.setattr(registry.docker, "run", lambda *a, input=None, **k: calls.append((a, input)))
    registry.trust_on_node("c1", "172.18.0.5:5000", b"PEM")
    (copy, data), (script, _) = calls
    assert copy == ("cp", "-", "c1:/")
    with tarfile.open(fileobj=io.BytesIO(data or b"")) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert files == {
        f"etc/{engine}/certs.d/{host}/ca.crt": b"PEM"
        for engine in ("containers", "docker")
        for host in ("172.18.0.5:5000", "registry:5000")
    } | {"usr/local/share/ca-certificates/gpuprov-sandbox-registry.crt": b"PEM"}
    assert "update-ca-certificates" in script[-1] and "update-ca-trust" in script[-1]


def test_the_registry_key_goes_in_with_mode_0600() -> None:
    with tarfile.open(
        fileobj=io.BytesIO(registry._tar({"/etc/x/server.key": b"k", "/etc/x/server.crt": b"c"}))
    ) as tar:
        modes = {m.name: m.mode for m in tar.getmembers() if m.isfile()}
    assert modes == {"etc/x/server.key": 0o600, "etc/x/server.crt": 0o644}


def test_the_registry_waits_for_its_certificate_and_serves_tls_only() -> None:
    assert "tls:" in registry.CONFIG and f"addr: :{registry.PORT}" in registry.CONFIG
    assert "until [ -s /etc/gpuprov-registry/server.key ]" in registry.IMAGE.changes[0]
    assert registry.IMAGE.packages == ("docker-registry",)


def _context(**changes: str) -> inventory.InventoryContext:
    base = {"sandbox": "s", "user": "u", "private_key": Path("/k"), "known_hosts": Path("/kh"),
            "mirror_url": "http://172.18.0.2", "mirror_key_fingerprint": "A" * 40}  # fmt: skip
    return inventory.InventoryContext(**{**base, **changes})  # type: ignore[arg-type]


def test_the_inventory_names_the_image_only_with_containers() -> None:
    node = [inventory.NodeEntry("node1", "172.18.0.3", "debian12")]
    assert "gpuprov_sandbox_image" not in inventory.render(node, _context())
    image = "172.18.0.5:5000/gpuprov/pytorch-cpu:2.13.0-cpu-abc@sha256:" + "0" * 64
    text = inventory.render(node, _context(registry="172.18.0.5:5000", sandbox_image=image))
    assert f"gpuprov_sandbox_image={image}\n" in text
    assert "gpuprov_sandbox_registry=172.18.0.5:5000\n" in text


def test_the_pytorch_image_is_made_from_the_mirror_wheels_without_an_index(tmp_path: Path) -> None:
    wheels = tmp_path / "pypi" / "wheels"
    wheels.mkdir(parents=True)
    with pytest.raises(GpuprovError, match=r"no torch 2\.13\.0 CPU wheel"):
        pytorch_image.spec(mirror.MirrorContent(tmp_path, "A" * 40))
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"x")
    (wheels / "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"y")
    spec = pytorch_image.spec(mirror.MirrorContent(tmp_path, "A" * 40))
    assert [p.name for p in spec.inputs] == sorted(p.name for p in wheels.iterdir())
    assert "--no-index" in spec.commands[1] and "torch==2.13.0+cpu" in spec.commands[1]
    # A different wheel set (size) is a different image; the same one is the same hash.
    first = service_images.image_hash(spec)
    assert service_images.image_hash(spec) == first
    (wheels / "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"yy")
    assert service_images.image_hash(spec) != first
    assert pytorch_image.tag("gpuprov/pytorch-cpu:233ca686af12") == "2.13.0-cpu-233ca686af12"


def test_nodes_get_cap_sys_resource_only_where_this_machine_can_grant_it(tmp_path: Path) -> None:
    from gpuprov.sandbox import cluster

    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapBnd:\t000001ffffffffff\n")
    assert cluster.node_capabilities(status) == ("--cap-add", "SYS_RESOURCE")
    status.write_text("Name:\tx\nCapBnd:\t000001fffeffffff\n")  # this build machine's: bit 24 clear
    assert cluster.node_capabilities(status) == ()
