"""The stand-in packages of the sandbox mirror: NVIDIA's package names and versions, small honest payloads.

The sandbox has no GPU and cannot reach NVIDIA's repositories, so its package mirror serves packages that
carry NVIDIA's real names, versions and dependency shape, and install small shell scripts, headers with the
real version defines, and tiny ELF libraries with the real sonames but no code. Everything around them
(repository setup, keys, pinning, holds, services, verification) is the real role code.

CATALOGUE (catalogue.py) is the one table of what the mirror holds; `deb_packages` and `rpm_packages`
(recipes.py, with drivers.py, cuda.py and tools.py) expand it into packages (model.py), and
gpuprov.sandbox.mirror builds and signs them. The installed tools are the shell programs in programs/
(shell.py fills them in). Every installed tool says it is a stand-in (`--help`, a comment at its top,
/usr/share/doc/<package>/STANDIN).

- catalogue.py: CATALOGUE, the releases the mirror holds (driver, CUDA, cuDNN, NCCL, DCGM, toolkit).
- model.py: a package and its entries (files, links, pins), for deb and rpm alike.
- recipes.py: deb_packages and rpm_packages, the catalogue expanded into packages.
- parts.py: the pieces every recipe uses: the STANDIN note, libraries, systemd units, headers.
- drivers.py: the driver's packages, with the names of NVIDIA's Ubuntu, Debian and RHEL repositories.
- cuda.py: the CUDA toolkit, cuDNN and NCCL.
- tools.py: DCGM and the container toolkit.
- keyring.py: NVIDIA's cuda-keyring package (the repository entry and key) and cuda-<os>.repo.
- elf.py: a shared library with a real soname and no code.
- shell.py: the stand-in programs (programs/, POSIX sh) filled in per package.
- smi_layout.py: nvidia-smi's summary table per driver branch, as recorded.
- conda.py: the stand-in Miniforge installer for the python_env role's conda path.
"""

from gpuprov.sandbox.standins.catalogue import (
    CATALOGUE,
    Catalogue,
    ContainerToolkitRelease,
    CudaRelease,
    CudnnRelease,
    DcgmRelease,
    DriverRelease,
    NcclRelease,
)
from gpuprov.sandbox.standins.conda import (
    CONDA_INSTALLER_NAME,
    CONDA_VERSION,
    conda_installer,
    conda_installer_sha256,
)
from gpuprov.sandbox.standins.elf import elf_shared_object
from gpuprov.sandbox.standins.model import Entry, File, Format, Link, Package, Pin, exact
from gpuprov.sandbox.standins.recipes import deb_packages, rpm_packages
from gpuprov.sandbox.standins.shell import GPUS_CONF
from gpuprov.sandbox.standins.tools import container_toolkit

__all__ = [
    "CATALOGUE",
    "CONDA_INSTALLER_NAME",
    "CONDA_VERSION",
    "GPUS_CONF",
    "Catalogue",
    "ContainerToolkitRelease",
    "CudaRelease",
    "CudnnRelease",
    "DcgmRelease",
    "DriverRelease",
    "Entry",
    "File",
    "Format",
    "Link",
    "NcclRelease",
    "Package",
    "Pin",
    "conda_installer",
    "conda_installer_sha256",
    "container_toolkit",
    "deb_packages",
    "elf_shared_object",
    "exact",
    "rpm_packages",
]
