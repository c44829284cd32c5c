"""The driver's stand-ins, with the names of NVIDIA's Ubuntu, Debian and RHEL repositories."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpuprov.sandbox.standins.catalogue import DriverRelease
from gpuprov.sandbox.standins.model import Entry, File, Format, Package, Pin, exact
from gpuprov.sandbox.standins.parts import library, package, unit
from gpuprov.sandbox.standins.shell import GPUS_CONF, program
from gpuprov.sandbox.standins.smi_layout import SmiLayout


def deb_driver(d: DriverRelease) -> list[Package]:
    """The driver with the names and dependency shape of Ubuntu's packaging, which NVIDIA's ubuntu*
    repositories carry: canonical/nvidia-graphics-drivers, debian/templates/control.in (branches 535-580).
    From R590 NVIDIA's repositories drop the branch from every name (see _ubuntu_name) and the shape stays.

    nvidia-driver-<b> is the desktop driver (GL, X server driver, video codecs); nvidia-headless-<b> the
    compute-only one, depending without a version on nvidia-headless-no-dkms-<b> and nvidia-dkms-<b>, which
    pin the rest at their exact version. The real nvidia-dkms-<b> also depends on dkms, and the proprietary
    one and nvidia-kernel-common-<b> on nvidia-firmware-<b>-<version>: left out here (dkms would pull
    Debian's real dkms and its compilers into the sandbox's containers; the firmware is named by version).
    nvidia-compute-utils-<b> ships Ubuntu's nvidia-persistenced unit and creates the daemon's user.
    """
    core = _ubuntu_core(d)
    desktop, drivers = _ubuntu_desktop(d, core)
    cuda_drivers = _ubuntu_package(
        d,
        # cuda-drivers-<b> up to R580; from R590 only the branch-less cuda-drivers, which NVIDIA's
        # repositories also carried before (Driver Installation Guide r590, "Ubuntu 590 package renames":
        # cuda-drivers-580 "will be removed", cuda-drivers "no change").
        "cuda-drivers" if _branchless(d) else f"cuda-drivers-{d.branch}",
        "CUDA driver metapackage",
        [],
        depends=(exact(drivers[0]) + exact(drivers[1]),),
        exclusive_group="cuda-drivers",
    )
    return [*core.packages(), *_ubuntu_headless(d, core), *desktop, *drivers, cuda_drivers, _ubuntu_fabric(d)]


# Ubuntu builds each branch with two kernel module flavours: proprietary ("") and open ("-open").
_FLAVOURS = ("", "-open")

# The first branch whose packages NVIDIA's ubuntu* repositories name without the branch: "Starting with branch
# 590, the Ubuntu packages will be renamed by removing the branch designation from the package name"
# (NVIDIA Driver Installation Guide r590, section 4.1.1 "Ubuntu 590 and later packages", with the table
# "Ubuntu 590 package renames": libnvidia-compute-580 -> libnvidia-compute, nvidia-dkms-580-open ->
# nvidia-dkms-open, ...). The same names in NVIDIA/gpu-driver-container ubuntu26.04/install.sh (commit
# 06a208c: nvidia-headless-no-dkms-open, libnvidia-gl, nvidia-dkms-open, nvidia-kernel-source, nvidia-driver).
FIRST_BRANCHLESS_UBUNTU_BRANCH = 590


def _branchless(d: DriverRelease) -> bool:
    return int(d.branch) >= FIRST_BRANCHLESS_UBUNTU_BRANCH


def _ubuntu_name(d: DriverRelease, base: str, flavour: str = "") -> str:
    """ "libnvidia-compute-580", "nvidia-dkms-580-open" up to R580; "libnvidia-compute", "nvidia-dkms-open"
    from R590."""
    return f"{base}{flavour}" if _branchless(d) else f"{base}-{d.branch}{flavour}"


def _ubuntu_package(
    d: DriverRelease,
    name: str,
    summary: str,
    entries: list[Entry],
    *,
    depends: tuple[tuple[Pin, ...], ...] = (),
    exclusive_group: str = "",
    postinst: str = "",
) -> Package:
    # A branch-less name (R590+) may be the group's own name ("libnvidia-compute"): the package is then the
    # group itself, and the older branches' Conflicts on the group name keep the two apart.
    return package(
        Format.DEB,
        d.version,
        "1",
        name,
        summary,
        entries,
        depends=depends,
        exclusive_group="" if exclusive_group == name else exclusive_group,
        postinst=postinst,
    )


def _empty(d: DriverRelease, name: str, summary: str, *depends: Package, group: str = "") -> Package:
    """A package without files that depends on others at their exact version."""
    return _ubuntu_package(
        d, name, summary, [], depends=tuple(exact(p) for p in depends), exclusive_group=group
    )


@dataclass(frozen=True)
class _UbuntuCore:
    """The parts both the headless and the desktop metapackages depend on; sources and dkms by flavour."""

    compute: Package
    utils: Package
    compute_utils: Package
    cfg1: Package
    common: Package
    sources: dict[str, Package]
    dkms: dict[str, Package]

    def packages(self) -> list[Package]:
        parts = (self.compute, self.utils, self.compute_utils, self.cfg1, self.common)
        return [*parts, *self.sources.values(), *self.dkms.values()]


def _ubuntu_core(d: DriverRelease) -> _UbuntuCore:
    compute = _ubuntu_package(
        d,
        _ubuntu_name(d, "libnvidia-compute"),
        "NVIDIA libcompute package (libcuda, libnvidia-ml)",
        _driver_libraries(d, Format.DEB),
        exclusive_group="libnvidia-compute",
    )
    common, sources, dkms = _ubuntu_kernel(d)
    return _UbuntuCore(
        compute=compute,
        utils=_ubuntu_package(
            d,
            _ubuntu_name(d, "nvidia-utils"),
            "NVIDIA driver support binaries (nvidia-smi)",
            [_nvidia_smi(d)],
            exclusive_group="nvidia-utils",
        ),
        compute_utils=_ubuntu_package(
            d,
            _ubuntu_name(d, "nvidia-compute-utils"),
            "NVIDIA compute utilities (nvidia-persistenced)",
            _ubuntu_persistenced(d),
            depends=((Pin(compute.name, ""),),),
            exclusive_group="nvidia-compute-utils",
            postinst=_UBUNTU_PERSISTENCED_USER,
        ),
        cfg1=_empty(
            d,
            _ubuntu_name(d, "libnvidia-cfg1"),
            "NVIDIA binary OpenGL/GLX configuration library",
            group="libnvidia-cfg1-any",
        ),
        common=common,
        sources=sources,
        dkms=dkms,
    )


def _ubuntu_kernel(d: DriverRelease) -> tuple[Package, dict[str, Package], dict[str, Package]]:
    """nvidia-kernel-common-<b>, and nvidia-kernel-source-<b> and nvidia-dkms-<b> by flavour."""
    common = _empty(
        d,
        _ubuntu_name(d, "nvidia-kernel-common"),
        "Shared files used with the kernel module",
        group="nvidia-kernel-common",
    )
    sources = {
        flavour: _empty(
            d,
            _ubuntu_name(d, "nvidia-kernel-source", flavour),
            "NVIDIA kernel source package",
            group="nvidia-kernel-source",
        )
        for flavour in _FLAVOURS
    }
    dkms = {
        flavour: _empty(
            d,
            _ubuntu_name(d, "nvidia-dkms", flavour),
            f"NVIDIA DKMS package ({'open' if flavour else 'proprietary'} kernel modules)",
            sources[flavour],
            common,
            group="nvidia-dkms-kernel",
        )
        for flavour in _FLAVOURS
    }
    return common, sources, dkms


def _ubuntu_headless(d: DriverRelease, core: _UbuntuCore) -> list[Package]:
    """nvidia-headless-no-dkms-<b> of each flavour, then nvidia-headless-<b> on it and nvidia-dkms-<b>."""
    no_dkms = {
        flavour: _empty(
            d,
            _ubuntu_name(d, "nvidia-headless-no-dkms", flavour),
            "NVIDIA headless metapackage - no DKMS",
            core.common,
            core.sources[flavour],
            core.compute,
            core.compute_utils,
            core.cfg1,
        )
        for flavour in _FLAVOURS
    }
    headless = [
        _ubuntu_package(
            d,
            _ubuntu_name(d, "nvidia-headless", flavour),
            "NVIDIA headless metapackage",
            [],
            depends=((Pin(no_dkms[flavour].name, ""),), (Pin(core.dkms[flavour].name, ""),)),
            exclusive_group="nvidia-headless",
        )
        for flavour in _FLAVOURS
    ]
    return [*no_dkms.values(), *headless]


def _ubuntu_desktop(d: DriverRelease, core: _UbuntuCore) -> tuple[list[Package], list[Package]]:
    """The desktop stack nvidia-driver-<b> adds (empty packages with the real names and dependencies), and
    nvidia-driver-<b> of each flavour on it."""
    gl = _empty(
        d,
        _ubuntu_name(d, "libnvidia-gl"),
        "NVIDIA OpenGL/GLX/EGL/GLES GLVND libraries and Vulkan ICD",
        group="libnvidia-gl",
    )
    extra = _empty(
        d,
        _ubuntu_name(d, "libnvidia-extra"),
        "Extra libraries for the NVIDIA driver",
        group="libnvidia-extra",
    )
    decode = _empty(
        d,
        _ubuntu_name(d, "libnvidia-decode"),
        "NVIDIA Video Decoding runtime libraries",
        core.compute,
        group="libnvidia-decode",
    )
    encode = _empty(
        d,
        _ubuntu_name(d, "libnvidia-encode"),
        "NVENC Video Encoding runtime library",
        group="libnvidia-encode",
    )
    fbc1 = _empty(
        d, _ubuntu_name(d, "libnvidia-fbc1"), "NVIDIA OpenGL-based Framebuffer Capture runtime library"
    )
    xserver = _empty(
        d,
        _ubuntu_name(d, "xserver-xorg-video-nvidia"),
        "NVIDIA binary Xorg driver",
        core.cfg1,
        group="nvidia-driver-binary",
    )
    # What nvidia-driver-<b> depends on, in the order its Depends line keeps.
    stack = (
        gl,
        core.common,
        core.compute,
        extra,
        core.compute_utils,
        decode,
        encode,
        core.utils,
        xserver,
        core.cfg1,
        fbc1,
    )
    drivers = [
        _empty(
            d,
            _ubuntu_name(d, "nvidia-driver", flavour),
            "NVIDIA driver metapackage",
            *stack,
            core.dkms[flavour],
            core.sources[flavour],
            group="nvidia-driver",
        )
        for flavour in _FLAVOURS
    ]
    return [gl, extra, decode, encode, fbc1, xserver], drivers


def _ubuntu_fabric(d: DriverRelease) -> Package:
    # nvidia-fabricmanager-<b> up to R575 (also in NVIDIA's debian12 repository, which names the driver the
    # Debian way: tests/recorded/README.md); from R580 one branch-less nvidia-fabricmanager, as the role's
    # vars/Debian.yml records (NVIDIA/gpu-driver-container pull request 451).
    return _ubuntu_package(
        d,
        "nvidia-fabricmanager" if int(d.branch) >= 580 else f"nvidia-fabricmanager-{d.branch}",
        "NVIDIA fabric manager (NVSwitch systems)",
        _fabricmanager(d),
        exclusive_group="nvidia-fabricmanager",
    )


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
    modules = _debian_kernel_modules(d)
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


def _debian_kernel_modules(d: DriverRelease) -> list[Package]:
    # Both module flavours provide nvidia-kernel-<version>, as NVIDIA's do; one excludes the other.
    kernel = Pin(f"nvidia-kernel-{d.version}", f"{d.version}-1")
    return [
        package(
            Format.DEB,
            d.version,
            "1",
            name,
            f"NVIDIA kernel modules, DKMS source ({what})",
            [],
            provides=(kernel,),
            conflicts=("nvidia-dkms-kernel",),
            exclusive_group="nvidia-kernel-module",
        )
        for name, what in (("nvidia-kernel-dkms", "proprietary"), ("nvidia-kernel-open-dkms", "open"))
    ]


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
    # nvidia-fabric-manager up to R575, nvidia-fabricmanager from R580 (NVIDIA/gpu-driver-container
    # rhel8/install.sh and rhel9/install.sh, commit 038c8b5f46c24e323485d0dd823ce435c1f19c9b).
    fabric_name = "nvidia-fabricmanager" if int(d.branch) >= 580 else "nvidia-fabric-manager"
    fabric = package(fmt, v, "1", fabric_name, "NVIDIA fabric manager (NVSwitch systems)", _fabricmanager(d))
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
