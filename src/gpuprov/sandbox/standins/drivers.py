"""The driver's stand-ins, with the names of NVIDIA's Ubuntu, Debian and RHEL repositories."""

from __future__ import annotations

import functools

from gpuprov.sandbox.standins.catalogue import DriverRelease
from gpuprov.sandbox.standins.model import Entry, File, Format, Package, Pin, exact
from gpuprov.sandbox.standins.parts import library, package, unit
from gpuprov.sandbox.standins.shell import GPUS_CONF, program


def deb_driver(d: DriverRelease) -> list[Package]:
    fmt, b = Format.DEB, d.branch
    pkg = functools.partial(package, fmt, d.version, "1")

    compute = pkg(
        f"libnvidia-compute-{b}",
        "NVIDIA libcompute package (libcuda, libnvidia-ml)",
        _driver_libraries(d, fmt),
        exclusive_group="libnvidia-compute",
    )
    utils = pkg(
        f"nvidia-utils-{b}",
        "NVIDIA driver support binaries (nvidia-smi)",
        [_nvidia_smi(d)],
        depends=(exact(compute),),
        exclusive_group="nvidia-utils",
    )
    compute_utils = pkg(
        f"nvidia-compute-utils-{b}",
        "NVIDIA compute utilities (nvidia-persistenced)",
        _persistenced(d),
        depends=(exact(compute),),
        exclusive_group="nvidia-compute-utils",
    )
    dkms = pkg(
        f"nvidia-dkms-{b}",
        "NVIDIA DKMS package (proprietary kernel modules)",
        [],
        exclusive_group="nvidia-dkms-kernel",
    )
    dkms_open = pkg(
        f"nvidia-dkms-{b}-open",
        "NVIDIA DKMS package (open kernel modules)",
        [],
        exclusive_group="nvidia-dkms-kernel",
    )
    common = (exact(utils), exact(compute), exact(compute_utils))
    driver = pkg(
        f"nvidia-driver-{b}",
        "NVIDIA driver metapackage",
        [],
        depends=(*common, exact(dkms)),
        exclusive_group="nvidia-driver",
    )
    driver_open = pkg(
        f"nvidia-driver-{b}-open",
        "NVIDIA driver (open kernel modules) metapackage",
        [],
        depends=(*common, exact(dkms_open)),
        exclusive_group="nvidia-driver",
    )
    cuda_drivers = pkg(
        f"cuda-drivers-{b}",
        "CUDA driver metapackage",
        [],
        depends=(exact(driver) + exact(driver_open),),
        exclusive_group="cuda-drivers",
    )
    fabric = pkg(
        f"nvidia-fabricmanager-{b}",
        "NVIDIA fabric manager (NVSwitch systems)",
        _fabricmanager(d),
        exclusive_group="nvidia-fabricmanager",
    )
    return [compute, utils, compute_utils, dkms, dkms_open, driver, driver_open, cuda_drivers, fabric]


def deb_driver_debian(d: DriverRelease) -> list[Package]:
    """The driver with the names of NVIDIA's debian12 repository: Debian's names, the same for every branch.

    Each branch is another version of the same packages, and nvidia-driver-cuda (what NVIDIA's guide installs
    on a compute node, with the kernel modules) depends on the others at its own exact version. The packages
    conflict with the per-branch names above that carry the same files, as Debian's and Ubuntu's packages
    of one driver cannot be installed together.
    """
    fmt = Format.DEB
    pkg = functools.partial(package, fmt, d.version, "1")
    libcuda = pkg(
        "libcuda1",
        "NVIDIA CUDA Driver Library",
        library(fmt.libdir, "libcuda", d.version, soname_version="1", what=f"NVIDIA driver {d.version}"),
        conflicts=("libnvidia-compute",),
    )
    libnvidia_ml = pkg(
        "libnvidia-ml1",
        "NVIDIA Management Library (NVML) runtime library",
        library(fmt.libdir, "libnvidia-ml", d.version, soname_version="1", what=f"NVIDIA driver {d.version}"),
        conflicts=("libnvidia-compute",),
    )
    smi = pkg(
        "nvidia-smi",
        "NVIDIA System Management Interface (nvidia-smi)",
        [_nvidia_smi(d)],
        depends=(exact(libnvidia_ml),),
        conflicts=("nvidia-utils",),
    )
    persistenced = pkg(
        "nvidia-persistenced",
        "NVIDIA persistence daemon",
        _persistenced(d),
        depends=(exact(libnvidia_ml),),
        conflicts=("nvidia-compute-utils",),
    )
    # Both module flavours provide nvidia-kernel-<version>, as NVIDIA's do; one excludes the other.
    kernel = Pin(f"nvidia-kernel-{d.version}", f"{d.version}-1")
    modules = [
        pkg(
            name,
            f"NVIDIA kernel modules, DKMS source ({what})",
            [],
            provides=(kernel,),
            conflicts=("nvidia-dkms-kernel",),
            exclusive_group="nvidia-kernel-module",
        )
        for name, what in (("nvidia-kernel-dkms", "proprietary"), ("nvidia-kernel-open-dkms", "open"))
    ]
    driver_cuda = pkg(
        "nvidia-driver-cuda",
        "NVIDIA driver CUDA integration components",
        [],
        depends=(
            exact(smi),
            exact(libcuda),
            exact(libnvidia_ml),
            exact(persistenced),
            tuple(p for m in modules for p in exact(m)),
        ),
    )
    return [libcuda, libnvidia_ml, smi, persistenced, *modules, driver_cuda]


def rpm_driver(d: DriverRelease) -> list[Package]:
    fmt, v = Format.RPM, d.version
    pkg = functools.partial(package, fmt, v, "1")
    kmod = Pin("nvidia-kmod", f"{v}-1")  # both kernel module flavours provide it, as NVIDIA's do
    libs = pkg(
        "nvidia-driver-libs", "NVIDIA driver libraries (libcuda, libnvidia-ml)", _driver_libraries(d, fmt)
    )
    latest = pkg(
        "kmod-nvidia-latest-dkms",
        "NVIDIA kernel modules (proprietary, DKMS)",
        [],
        provides=(kmod,),
        conflicts=("kmod-nvidia-open-dkms",),
    )
    open_ = pkg(
        "kmod-nvidia-open-dkms",
        "NVIDIA kernel modules (open, DKMS)",
        [],
        provides=(kmod,),
        conflicts=("kmod-nvidia-latest-dkms",),
    )
    driver = pkg("nvidia-driver", "NVIDIA driver", [], depends=(exact(libs), (kmod,)))
    persistenced = pkg(
        "nvidia-persistenced", "NVIDIA persistence daemon", _persistenced(d), depends=(exact(libs),)
    )
    smi = pkg(
        "nvidia-driver-cuda",
        "NVIDIA driver CUDA support (nvidia-smi)",
        [_nvidia_smi(d)],
        depends=(exact(driver), exact(libs)),
    )
    cuda_drivers = pkg(
        "cuda-drivers",
        "CUDA driver metapackage",
        [],
        depends=(exact(driver), exact(smi), exact(libs), exact(persistenced)),
    )
    fabric = pkg("nvidia-fabric-manager", "NVIDIA fabric manager (NVSwitch systems)", _fabricmanager(d))
    return [libs, latest, open_, driver, persistenced, smi, cuda_drivers, fabric]


def _driver_libraries(d: DriverRelease, fmt: Format) -> list[Entry]:
    entries: list[Entry] = []
    for lib in ("libcuda", "libnvidia-ml"):
        entries += library(fmt.libdir, lib, d.version, soname_version="1", what=f"NVIDIA driver {d.version}")
    return entries


def _nvidia_smi(d: DriverRelease) -> File:
    script = program(
        "nvidia-smi.sh",
        VERSION=d.version,
        CUDA=d.cuda,
        CONF=GPUS_CONF,
        TABLE_HEAD=_smi_table_head(),
        TABLE_PROCESSES=_smi_table_processes(),
    )
    return File("/usr/bin/nvidia-smi", script, 0o755)


def _persistenced(d: DriverRelease) -> list[Entry]:
    daemon = program("nvidia-persistenced.sh", VERSION=d.version, CONF=GPUS_CONF)
    service = unit("NVIDIA Persistence Daemon", "/usr/bin/nvidia-persistenced --verbose")
    return [
        File("/usr/bin/nvidia-persistenced", daemon, 0o755),
        File("/usr/lib/systemd/system/nvidia-persistenced.service", service.encode()),
    ]


def _fabricmanager(d: DriverRelease) -> list[Entry]:
    config = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
    daemon = program("nv-fabricmanager.sh", VERSION=d.version, CONF=GPUS_CONF)
    service = unit(
        "NVIDIA fabric manager service",
        f"/usr/bin/nv-fabricmanager -c {config}",
        after="network-online.target",
    )
    return [
        File("/usr/bin/nv-fabricmanager", daemon, 0o755),
        File("/usr/lib/systemd/system/nvidia-fabricmanager.service", service.encode()),
        File(config, b"# gpuprov sandbox stand-in for the fabric manager configuration\nLOG_LEVEL=4\n"),
    ]


# The summary table's fixed parts, around the per-GPU rows nvidia-smi.sh prints.


def _smi_table_head() -> str:
    rows = [  # (left, middle, right), then the corner characters of the row
        (("-" * 41, "-" * 24, "-" * 22), "|+++"),
        (
            (" GPU  Name                 Persistence-M", " Bus-Id          Disp.A", " Volatile Uncorr. ECC"),
            "||||",
        ),
        (
            (" Fan  Temp   Perf          Pwr:Usage/Cap", "           Memory-Usage", " GPU-Util  Compute M."),
            "||||",
        ),
        (("", "", "               MIG M."), "||||"),
        (("=" * 41, "=" * 24, "=" * 22), "|++|"),
    ]
    return "\n".join(f"{c[0]}{a:<41}{c[1]}{b:<24}{c[2]}{d:<22}{c[3]}" for (a, b, d), c in rows)


def _smi_table_processes() -> str:
    width = 89
    lines = [
        " " * (width + 2),
        "+" + "-" * width + "+",
        "|" + f" {'Processes:':<{width - 1}}" + "|",
        "|" + f"  GPU   GI   CI        PID   Type   Process name{'GPU Memory':>{width - 49}} " + "|",
        "|" + f"        ID   ID{'Usage':>{width - 21}}{'':6}" + "|",
        "|" + "=" * width + "|",
        "|" + f"  {'No running processes found':<{width - 2}}" + "|",
        "+" + "-" * width + "+",
    ]
    return "\n".join(lines)
