"""A stand-in Miniforge installer, served by the mirror for the python_env role's conda path.

The real one (about 80 MiB, from GitHub) cannot be downloaded here. It supports exactly what the role
uses: the installer's batch mode (`-b -p PREFIX`), and `conda --version` and `conda create --yes --prefix P
--override-channels --channel=C... python=X.Y`, which makes a venv of the host's Python X.Y (stand-in for
conda's Python) that pip then fills as in a real conda environment. The installer is
programs/conda-installer.sh, which carries programs/conda.sh.
"""

from __future__ import annotations

import hashlib

from gpuprov.sandbox.standins.shell import program

CONDA_INSTALLER_NAME = "Miniforge3-24.11.3-0-Linux-x86_64.sh"
CONDA_VERSION = "24.11.3"


def conda_installer() -> bytes:
    """The stand-in Miniforge installer the mirror serves at conda/<CONDA_INSTALLER_NAME>."""
    return program("conda-installer.sh", VERSION=CONDA_VERSION)


def conda_installer_sha256() -> str:
    return hashlib.sha256(conda_installer()).hexdigest()
