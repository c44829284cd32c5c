"""slurm_pyxis's build of pyxis, run here (`-c local`) into a scratch prefix against this machine's Slurm
headers: pyxis 0.24.0's tarball (made from NVIDIA's source by nvidia_builds) built with its own Makefile,
the stamp of what it was built from, nothing done on a second run or a check run, a changed plugin built
again, and a check run that says so. Skipped without NVIDIA's sources or the Slurm headers (libslurm-dev)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.slurm import nvidia_builds
from tests.local.roles.local_play import BIN, ROLES

HEADERS = Path("/usr/include/slurm/slurm_version.h")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = nvidia_builds.unavailable()
    if reason or not HEADERS.is_file() or not shutil.which("gcc"):
        pytest.skip(reason or "no Slurm headers (libslurm-dev) or gcc on this machine")
    work = tmp_path_factory.mktemp("pyxis-build")
    tarball = nvidia_builds.build(work / "files").root / "pyxis" / "pyxis-0.24.0.tar.gz"
    settings = {
        "slurm_pyxis_version": "0.24.0",
        "slurm_pyxis_prefix": str(work / "prefix"),
        "slurm_pyxis_source_url": f"file://{tarball}",
        "slurm_pyxis_checksums": {tarball.name: "sha256:" + hashlib.sha256(tarball.read_bytes()).hexdigest()},
        "__slurm_pyxis_compiler_packages": ["gcc", "make"],
        "__slurm_pyxis_dev_package": "libslurm-dev",
        "__slurm_pyxis_plugin": str(work / "prefix" / "lib" / "slurm" / "spank_pyxis.so"),
        "__slurm_pyxis_tarball": tarball.name,
        "__slurm_pyxis_download_dir": str(work / "downloads"),
        "ansible_python_interpreter": sys.executable,
    }
    (work / "downloads").mkdir()
    (work / "vars.json").write_text(json.dumps(settings))
    play = [{"hosts": "localhost", "gather_facts": True, "tasks": [
        {"ansible.builtin.include_role": {"name": "slurm_pyxis", "tasks_from": "pyxis.yml"}}]}]  # fmt: skip
    (work / "play.yml").write_text(json.dumps(play))
    return work


def run(work: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(work / "play.yml"),
         "-e", f"@{work / 'vars.json'}", *args],
        capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "ANSIBLE_ROLES_PATH": str(ROLES),
             "ANSIBLE_NOCOLOR": "1"},
    )  # fmt: skip
    changed = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", proc.stdout)
    assert proc.returncode == 0 and changed, proc.stdout[-3000:] + proc.stderr[-2000:]
    return int(changed[1]), proc.stdout


def test_built_once_then_left_alone_and_built_again_when_changed(setup: Path) -> None:
    plugin = setup / "prefix" / "lib" / "slurm" / "spank_pyxis.so"
    assert run(setup)[0] > 0
    stamp = (setup / "prefix" / "share" / "pyxis" / "gpuprov-build").read_text().splitlines()
    found = re.search(r"SLURM_VERSION_NUMBER\s+(0x[0-9a-f]+)", HEADERS.read_text())
    assert found
    number = int(found[1], 16)
    slurm = f"{number >> 16}.{number >> 8 & 255:02d}.{number & 255}"
    assert stamp[0].startswith(f"pyxis=0.24.0 slurm={slurm} source=sha256:")
    assert stamp[1] == "plugin=" + hashlib.sha256(plugin.read_bytes()).hexdigest()
    # A SPANK plugin: an ELF shared object that names itself, as slurmd's plugin loader needs.
    assert plugin.read_bytes()[:4] == b"\x7fELF" and b"plugin_name" in plugin.read_bytes()
    assert run(setup)[0] == 0
    assert run(setup, "--check")[0] == 0
    with plugin.open("ab") as f:
        f.write(b"drift")
    changed, output = run(setup, "--check")
    assert changed == 1 and "pyxis would be built" in output
    assert run(setup)[0] > 0
    assert not plugin.read_bytes().endswith(b"drift")
    assert run(setup)[0] == 0
