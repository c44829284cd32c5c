"""SSH keys for a sandbox: one client key pair, and a host key per node that gpuprov makes itself.

Because gpuprov generates each node's host key before the node starts, it can write known_hosts up
front, and every connection keeps strict host key checking on: nothing is trusted on first use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True)
class KeyPair:
    private_openssh: bytes  # OpenSSH PEM, as sshd and ssh read it
    public_openssh: str  # "ssh-ed25519 AAAA..."


def generate(comment: str) -> KeyPair:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return KeyPair(private, f"{public.decode()} {comment}")


def load_or_create_client_key(path: Path, comment: str) -> KeyPair:
    """The sandbox's client key at path (private) and path.pub, created on first use."""
    pub_path = path.with_suffix(".pub")
    if path.is_file() and pub_path.is_file():
        return KeyPair(path.read_bytes(), pub_path.read_text().strip())
    pair = generate(comment)
    write_private(path, pair.private_openssh)
    pub_path.write_text(pair.public_openssh + "\n")
    return pair


def write_private(path: Path, data: bytes) -> None:
    """Write a private key readable by its owner only, from the moment it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def public_key_fields(public_openssh: str) -> str:
    """'ssh-ed25519 AAAA...' without the comment, as known_hosts wants it."""
    return " ".join(public_openssh.split()[:2])
