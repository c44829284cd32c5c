"""The catalogue expanded into packages: every stand-in of the apt and of the rpm repositories."""

from __future__ import annotations

from gpuprov.sandbox.standins import cuda, drivers, tools
from gpuprov.sandbox.standins.catalogue import Catalogue
from gpuprov.sandbox.standins.model import Format, Package


def deb_packages(catalogue: Catalogue) -> list[Package]:
    """Every stand-in of the apt repositories (Ubuntu and Debian names, as in NVIDIA's CUDA repos)."""
    return _packages(catalogue, Format.DEB)


def rpm_packages(catalogue: Catalogue) -> list[Package]:
    """Every stand-in of the rpm repositories (RHEL and Rocky names, as in NVIDIA's CUDA repos)."""
    return _packages(catalogue, Format.RPM)


# The rpm repositories hold the driver branches whose dnf module metadata (streams, profiles, defaults) is
# recorded (tests/recorded/el-module-streams.yaml: genmodules.py's rules, and the streams they give for 535,
# 550, 570 and 580; NVIDIA's driver installation guide names `dnf module enable nvidia-driver:580-open` for
# RHEL 8/9). No rhel stream of R590 or later is recorded, so the rpm stand-ins stop at 580 while the apt ones
# go on (R590's new Ubuntu names).
RPM_DRIVER_BRANCHES = ("535", "550", "570", "580")


def _packages(catalogue: Catalogue, fmt: Format) -> list[Package]:
    packages: list[Package] = []
    for d in catalogue.drivers:
        if fmt is Format.DEB:  # one apt repository holds both naming schemes; the names do not clash
            packages += drivers.deb_driver(d) + drivers.deb_driver_debian(d)
        elif d.branch in RPM_DRIVER_BRANCHES:
            packages += drivers.rpm_driver(d)
    for c in catalogue.cuda:
        packages += cuda.cuda_toolkit(c, fmt)
    for cudnn in catalogue.cudnn:
        packages += cuda.cudnn(cudnn, fmt)
    for n in catalogue.nccl:
        packages += cuda.nccl(n, fmt)
    for g in catalogue.dcgm:
        packages.append(tools.dcgm(g, fmt))
    for t in catalogue.container_toolkit:
        packages += tools.container_toolkit(t, fmt)
    return packages
