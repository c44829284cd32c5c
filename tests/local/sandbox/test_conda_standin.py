"""The sandbox's stand-in Miniforge installer, and the sandbox inventory's settings for python_env."""

from __future__ import annotations

import configparser
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuprov.sandbox import inventory, standins


def test_the_checksum_is_the_installers_whichever_process_made_it(tmp_path: Path):
    """The inventory's checksum and the mirror's installer come from different gpuprov runs: the installer
    must come out byte for byte the same (no timestamp, no random part) for the role's check to pass."""
    served = tmp_path / standins.CONDA_INSTALLER_NAME
    script = (
        "import sys; from gpuprov.sandbox import standins\n"
        "open(sys.argv[1], 'wb').write(standins.conda_installer())"
    )
    subprocess.run([sys.executable, "-c", script, str(served)], check=True)
    assert hashlib.sha256(served.read_bytes()).hexdigest() == standins.conda_installer_sha256()


def install(tmp_path: Path) -> Path:
    installer = tmp_path / standins.CONDA_INSTALLER_NAME
    installer.write_bytes(standins.conda_installer())
    prefix = tmp_path / "miniforge3"
    subprocess.run(["sh", str(installer), "-b", "-p", str(prefix)], check=True, capture_output=True)
    return prefix


def test_installer_batch_mode_installs_a_conda_that_says_it_is_a_standin(tmp_path: Path):
    prefix = install(tmp_path)
    version = subprocess.run([prefix / "bin" / "conda", "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == f"conda {standins.CONDA_VERSION}"
    assert "stand-in" in (prefix / "STANDIN").read_text()
    again = subprocess.run(["sh", str(tmp_path / standins.CONDA_INSTALLER_NAME), "-b", "-p", str(prefix)])
    assert again.returncode != 0  # like the real installer: an existing prefix is refused


@pytest.mark.integration  # builds a Python environment with pip: seconds of work, not the fast lane's
@pytest.mark.skipif(not shutil.which("python3.11"), reason="needs the host's python3.11")
def test_conda_create_makes_an_environment_with_that_python(tmp_path: Path):
    conda = install(tmp_path) / "bin" / "conda"
    env = tmp_path / "env"
    args = ["create", "--yes", "--prefix", env, "--override-channels", "--channel=conda-forge", "python=3.11"]
    subprocess.run([conda, *args], check=True, capture_output=True)
    out = subprocess.run([env / "bin" / "python", "-c", "import sys; print(sys.prefix)"], capture_output=True)
    assert out.stdout.decode().strip() == str(env)


def test_conda_create_refuses_packages_it_cannot_install(tmp_path: Path):
    conda = install(tmp_path) / "bin" / "conda"
    proc = subprocess.run(
        [conda, "create", "--yes", "--prefix", tmp_path / "env", "python=3.11", "cudatoolkit"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode != 0 and "PackagesNotFoundError: cudatoolkit" in proc.stderr
    assert not (tmp_path / "env").exists()


def test_inventory_points_python_env_at_the_mirror():
    ctx = inventory.InventoryContext("s", "u", Path("/k"), Path("/kh"), "http://10.1.2.3", "A" * 40)
    text = inventory.render([inventory.NodeEntry("node1", "10.1.2.4", "debian12")], ctx)
    parser = configparser.ConfigParser(delimiters=("=",), allow_no_value=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    group = parser["gpu_nodes:vars"]
    assert group["python_env_pip_trusted_hosts"] == "['10.1.2.3']"
    assert group["python_env_conda_installer_url"] == f"http://10.1.2.3/conda/{standins.CONDA_INSTALLER_NAME}"
    assert group["python_env_conda_installer_sha256"] == standins.conda_installer_sha256()
    assert group["network_tuning_tolerate_unsettable"] == "true"
