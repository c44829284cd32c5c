"""A small .deb built with dpkg-deb for the stand-in tests that repackage Debian's packages."""

from __future__ import annotations

import subprocess
from pathlib import Path


def build_deb(directory: Path, name: str, files: dict[str, str], control: str = "") -> Path:
    """`name`_1.0_amd64.deb in directory, with `files` (path: text) and `control` or a minimal one."""
    root = directory / f"src-{name}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        control
        or f"Package: {name}\nVersion: 1.0\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: t\n"
    )
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    out = directory / f"{name}_1.0_amd64.deb"
    subprocess.run(
        ["dpkg-deb", "--build", "--root-owner-group", str(root), str(out)], check=True, capture_output=True
    )
    return out
