"""The sandbox registry's TLS: a certificate authority of the sandbox's own and the registry's certificate.

Each sandbox makes its CA once (kept in its state directory, the key readable by its owner only) and signs
the registry's certificate for the address Docker gives the registry container and its network alias, so the
nodes' engines and this machine verify the registry like any other, with no `insecure-registries`.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVER_DAYS = 825  # the longest validity Apple's and browsers' TLS policies accept; engines do not care


@dataclass(frozen=True)
class Authority:
    cert_pem: bytes
    key: ec.EllipticCurvePrivateKey


def load_or_create_ca(directory: Path, sandbox: str) -> Authority:
    """The sandbox's CA from directory/ca.crt and ca.key, made (key mode 0600) when they are not there."""
    cert_path, key_path = directory / "ca.crt", directory / "ca.key"
    if cert_path.is_file() and key_path.is_file():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return Authority(cert_path.read_bytes(), key)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpuprov sandbox {sandbox} registry CA")])
    cert = (
        _builder(name, name, key.public_key(), CA_DAYS)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    _write_private(key_path, _key_pem(key))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_path.write_bytes(cert_pem)
    return Authority(cert_pem, key)


def server_certificate(ca: Authority, address: str, names: tuple[str, ...]) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for the registry at this IP address and these DNS names."""
    key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else address)])
    alt = [x509.IPAddress(ipaddress.ip_address(address)), *(x509.DNSName(n) for n in names)]
    cert = (
        _builder(subject, ca_cert.subject, key.public_key(), SERVER_DAYS)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def names_in(cert_pem: bytes) -> set[str]:
    """The IP addresses and DNS names a certificate is for."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(ip) for ip in alt.get_values_for_type(x509.IPAddress)} | set(
        alt.get_values_for_type(x509.DNSName)
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a node's clock a little behind
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def _usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign, key_cert_sign=cert_sign, crl_sign=cert_sign,
        content_commitment=False, key_encipherment=False, data_encipherment=False, key_agreement=False,
        encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
