"""The driver's stand-ins, with the names of NVIDIA's Ubuntu, Debian and RHEL repositories."""

from __future__ import annotations

import functools

from gpuprov.sandbox.standins.catalogue import DriverRelease
from gpuprov.sandbox.standins.model import Entry, File, Format, Package, Pin, exact
from gpuprov.sandbox.standins.parts import library, package, unit
from gpuprov.sandbox.standins.shell import GPUS_CONF, program
from gpuprov.sandbox.standins.smi_layout import SmiLayout


def deb_driver(d: DriverRelease) -> list[Package]:
    """The driver with the names and dependency shape of Ubuntu's packaging, which NVIDIA's ubuntu*
    repositories carry: canonical/nvidia-graphics-drivers, debian/templates/control.in (branches 535-580).

    nvidia-driver-<b> is the desktop driver (GL, X server driver, video codecs); nvidia-headless-<b> the
    compute-only one, depending without a version on nvidia-headless-no-dkms-<b> and nvidia-dkms-<b>, which
    pin the rest at their exact version. The real nvidia-dkms-<b> also depends on dkms, and the proprietary
    one and nvidia-kernel-common-<b> on nvidia-firmware-<b>-<version>: left out here (dkms would pull
    Debian's real dkms and its compilers into the sandbox's containers; the firmware is named by version).
    nvidia-compute-utils-<b> ships Ubuntu's nvidia-persistenced unit and creates the daemon's user.
    """
    fmt, b = Format.DEB, d.branch
    pkg = functools.partial(package, fmt, d.version, "1")

    def empty(name: str, summary: str, *depends: Package, group: str = "") -> Package:
        return pkg(name, summary, [], depends=tuple(exact(p) for p in depends), exclusive_group=group)

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
        exclusive_group="nvidia-utils",
    )
    compute_utils = pkg(
        f"nvidia-compute-utils-{b}",
        "NVIDIA compute utilities (nvidia-persistenced)",
        _ubuntu_persistenced(d),
        depends=((Pin(compute.name, ""),),),
        exclusive_group="nvidia-compute-utils",
        postinst=_UBUNTU_PERSISTENCED_USER,
    )
    cfg1 = empty(
        f"libnvidia-cfg1-{b}", "NVIDIA binary OpenGL/GLX configuration library", group="libnvidia-cfg1-any"
    )
    common = empty(
        f"nvidia-kernel-common-{b}", "Shared files used with the kernel module", group="nvidia-kernel-common"
    )
    sources = {
        flavour: empty(
            f"nvidia-kernel-source-{b}{flavour}", "NVIDIA kernel source package", group="nvidia-kernel-source"
        )
        for flavour in ("", "-open")
    }
    dkms = {
        flavour: empty(
            f"nvidia-dkms-{b}{flavour}",
            f"NVIDIA DKMS package ({'open' if flavour else 'proprietary'} kernel modules)",
            sources[flavour],
            common,
            group="nvidia-dkms-kernel",
        )
        for flavour in ("", "-open")
    }
    no_dkms = {
        flavour: empty(
            f"nvidia-headless-no-dkms-{b}{flavour}",
            "NVIDIA headless metapackage - no DKMS",
            common,
            sources[flavour],
            compute,
            compute_utils,
            cfg1,
        )
        for flavour in ("", "-open")
    }
    headless = [
        pkg(
            f"nvidia-headless-{b}{flavour}",
            "NVIDIA headless metapackage",
            [],
            depends=((Pin(no_dkms[flavour].name, ""),), (Pin(dkms[flavour].name, ""),)),
            exclusive_group="nvidia-headless",
        )
        for flavour in ("", "-open")
    ]
    # The desktop stack nvidia-driver-<b> adds: empty packages with the real names and dependencies.
    gl = empty(
        f"libnvidia-gl-{b}", "NVIDIA OpenGL/GLX/EGL/GLES GLVND libraries and Vulkan ICD", group="libnvidia-gl"
    )
    extra = empty(f"libnvidia-extra-{b}", "Extra libraries for the NVIDIA driver", group="libnvidia-extra")
    decode = empty(
        f"libnvidia-decode-{b}", "NVIDIA Video Decoding runtime libraries", compute, group="libnvidia-decode"
    )
    encode = empty(f"libnvidia-encode-{b}", "NVENC Video Encoding runtime library", group="libnvidia-encode")
    fbc1 = empty(f"libnvidia-fbc1-{b}", "NVIDIA OpenGL-based Framebuffer Capture runtime library")
    xserver = empty(
        f"xserver-xorg-video-nvidia-{b}", "NVIDIA binary Xorg driver", cfg1, group="nvidia-driver-binary"
    )
    desktop = (gl, common, compute, extra, compute_utils, decode, encode, utils, xserver, cfg1, fbc1)
    drivers = [
        empty(
            f"nvidia-driver-{b}{flavour}",
            "NVIDIA driver metapackage",
            *desktop,
            dkms[flavour],
            sources[flavour],
            group="nvidia-driver",
        )
        for flavour in ("", "-open")
    ]
    cuda_drivers = pkg(
        f"cuda-drivers-{b}",
        "CUDA driver metapackage",
        [],
        depends=(exact(drivers[0]) + exact(drivers[1]),),
        exclusive_group="cuda-drivers",
    )
    # nvidia-fabricmanager-<b> up to R575 (also in NVIDIA's debian12 repository, which names the driver the
    # Debian way: tests/recorded/README.md); from R580 one branch-less nvidia-fabricmanager, as the role's
    # vars/Debian.yml records (NVIDIA/gpu-driver-container pull request 451).
    fabric = pkg(
        "nvidia-fabricmanager" if int(b) >= 580 else f"nvidia-fabricmanager-{b}",
        "NVIDIA fabric manager (NVSwitch systems)",
        _fabricmanager(d),
        exclusive_group="nvidia-fabricmanager",
    )
    return [
        compute,
        utils,
        compute_utils,
        cfg1,
        common,
        *sources.values(),
        *dkms.values(),
        *no_dkms.values(),
        *headless,
        gl,
        extra,
        decode,
        encode,
        fbc1,
        xserver,
        *drivers,
        cuda_drivers,
        fabric,
    ]


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


# NVIDIA's rpm driver packages carry epoch 3 and this dependency shape (nvidia-driver.spec in
# github.com/NVIDIA/yum-packaging-nvidia-driver, commit 015ac1c627ed692871508dab5b5ad9368a1763ec):
# nvidia-driver requires nvidia-driver-libs and nvidia-kmod-common at its version; nvidia-driver-cuda (with
# nvidia-smi) requires nvidia-driver-cuda-libs (with libcuda) and nvidia-persistenced. The kernel module
# packages provide nvidia-kmod. (libnvidia-ml stays in nvidia-driver-libs here; NVIDIA ships it in
# nvidia-driver-NVML, which nothing the roles install requires.)
RPM_DRIVER_EPOCH = 3


def rpm_driver(d: DriverRelease) -> list[Package]:
    fmt, v = Format.RPM, d.version
    pkg = functools.partial(package, fmt, v, "1", epoch=RPM_DRIVER_EPOCH)
    kmod = Pin("nvidia-kmod", f"{RPM_DRIVER_EPOCH}:{v}-1")  # both kernel module flavours provide it
    libs = pkg(
        "nvidia-driver-libs",
        "NVIDIA driver libraries (libnvidia-ml)",
        library(fmt.libdir, "libnvidia-ml", v, soname_version="1", what=f"NVIDIA driver {v}"),
    )
    cuda_libs = pkg(
        "nvidia-driver-cuda-libs",
        "NVIDIA driver CUDA libraries (libcuda)",
        library(fmt.libdir, "libcuda", v, soname_version="1", what=f"NVIDIA driver {v}"),
    )
    kmod_common = pkg("nvidia-kmod-common", "Common file for NVIDIA's proprietary driver kernel modules", [])
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
    driver = pkg("nvidia-driver", "NVIDIA driver", [], depends=(exact(libs), exact(kmod_common), (kmod,)))
    persistenced = pkg(
        "nvidia-persistenced", "NVIDIA persistence daemon", _persistenced(d), depends=(exact(libs),)
    )
    smi = pkg(
        "nvidia-driver-cuda",
        "NVIDIA driver CUDA support (nvidia-smi)",
        [_nvidia_smi(d)],
        depends=(exact(cuda_libs), exact(persistenced), exact(libs)),
    )
    cuda_drivers = package(
        fmt,
        v,
        "1",
        "cuda-drivers",
        "CUDA driver metapackage",
        [],
        depends=(exact(driver), exact(smi), exact(libs), exact(persistenced)),
    )
    fabric = package(
        fmt, v, "1", "nvidia-fabric-manager", "NVIDIA fabric manager (NVSwitch systems)", _fabricmanager(d)
    )
    return [libs, cuda_libs, kmod_common, latest, open_, driver, persistenced, smi, cuda_drivers, fabric]


def _driver_libraries(d: DriverRelease, fmt: Format) -> list[Entry]:
    entries: list[Entry] = []
    for lib in ("libcuda", "libnvidia-ml"):
        entries += library(fmt.libdir, lib, d.version, soname_version="1", what=f"NVIDIA driver {d.version}")
    return entries


def _nvidia_smi(d: DriverRelease) -> File:
    layout = SmiLayout(int(d.branch))
    name, usage, mig, border = layout.gpu_formats()
    script = program(
        "nvidia-smi.sh",
        VERSION=d.version,
        BRANCH=d.branch,
        CUDA=d.cuda,
        CONF=GPUS_CONF,
        TABLE_TOP=layout.top(),
        HEADER_FORMAT=layout.header_format(),
        TABLE_HEAD=layout.head(),
        GPU_NAME_FORMAT=name,
        GPU_USAGE_FORMAT=usage,
        GPU_MIG_FORMAT=mig,
        GPU_BORDER=border,
        TABLE_PROCESSES=layout.processes(),
    )
    return File("/usr/bin/nvidia-smi", script, 0o755)


def _persistenced(d: DriverRelease) -> list[Entry]:
    daemon = program("nvidia-persistenced.sh", VERSION=d.version, CONF=GPUS_CONF)
    service = unit(
        "NVIDIA Persistence Daemon", "/usr/bin/nvidia-persistenced --verbose", service_type="forking"
    )
    return [
        File("/usr/bin/nvidia-persistenced", daemon, 0o755),
        File("/usr/lib/systemd/system/nvidia-persistenced.service", service.encode()),
    ]


def _ubuntu_persistenced(d: DriverRelease) -> list[Entry]:
    """Ubuntu's nvidia-compute-utils-<b>: the daemon and Ubuntu's own unit, word for word."""
    daemon = program("nvidia-persistenced.sh", VERSION=d.version, CONF=GPUS_CONF)
    return [
        File("/usr/bin/nvidia-persistenced", daemon, 0o755),
        File("/lib/systemd/system/nvidia-persistenced.service", UBUNTU_PERSISTENCED_UNIT.encode()),
    ]


# Ubuntu's unit: canonical/nvidia-graphics-drivers, debian/templates/
# nvidia-compute-utils-flavour.nvidia-persistenced.service.in, the same on branches 535-server-jammy,
# 550-jammy, 550-server-jammy, 570-server-noble and 580-server-noble. Static (no [Install] section),
# StopWhenUnneeded, and persistence mode off; Ubuntu's udev rules (debian/71-nvidia.rules) start it when
# the nvidia module loads. tests/recorded/ubuntu-nvidia-persistenced.service keeps a copy.
UBUNTU_PERSISTENCED_UNIT = """\
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
StopWhenUnneeded=true
Before=systemd-backlight@backlight:nvidia_0.service

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

"""

# Ubuntu's postinst (debian/templates/nvidia-compute-utils-flavour.postinst.in) creates the daemon's user
# with `adduser --system --no-create-home --home /nonexistent --gecos 'NVIDIA Persistence Daemon' --group`;
# the stand-in does the same with useradd/groupadd, which every Debian host has (adduser is not in minbase).
_UBUNTU_PERSISTENCED_USER = """\
#!/bin/sh
set -e
if [ "$1" = configure ] && ! id nvidia-persistenced >/dev/null 2>&1; then
    groupadd --system nvidia-persistenced
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \\
        --gid nvidia-persistenced --comment 'NVIDIA Persistence Daemon' nvidia-persistenced
fi
"""


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
