"""The stand-in packages of the sandbox mirror: NVIDIA's package names and versions, small honest payloads.

The sandbox has no GPU and cannot reach NVIDIA's repositories, so its package mirror serves packages that
carry NVIDIA's real names, versions and dependency shape, and install small shell scripts, headers with the
real version defines, and tiny ELF libraries with the real sonames but no code. Everything around them
(repository setup, keys, pinning, holds, services, verification) is the real role code.

CATALOGUE is the one table of what the mirror holds; `deb_packages` and `rpm_packages` expand it into
packages, and gpuprov.sandbox.mirror builds and signs them. Every installed tool says it is a stand-in
(`--help`, a comment at its top, /usr/share/doc/<package>/STANDIN).
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import struct
from dataclasses import dataclass

# --------------------------------------------------------------------------------------------------------
# The catalogue


@dataclass(frozen=True)
class DriverRelease:
    branch: str  # "550"
    version: str  # "550.127.08"
    cuda: str  # the newest CUDA the driver supports, shown by nvidia-smi ("12.4")


@dataclass(frozen=True)
class CudaRelease:
    version: str  # "12.4.1"
    nvcc_version: str  # "12.4.131", from `nvcc --version`
    nvcc_build: str  # "34097967", the compiler build number in "Build cuda_12.4.r12.4/compiler.N_0"
    nvcc_built_on: str  # "Thu_Mar_28_02:18:24_PDT_2024"

    @property
    def short(self) -> str:
        """ "12.4": the directory suffix (/usr/local/cuda-12.4) and the nvcc "release"."""
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class CudnnRelease:
    version: str  # "9.5.1.17"
    cuda: str  # "12" for cuDNN 9 (built per CUDA major), "12.2" for cuDNN 8 (per CUDA minor)


@dataclass(frozen=True)
class NcclRelease:
    version: str  # "2.21.5"
    cuda: str  # "12.4"


@dataclass(frozen=True)
class DcgmRelease:
    version: str  # "3.3.9"
    epoch: int  # NVIDIA's DCGM packages carry epoch 1


@dataclass(frozen=True)
class ContainerToolkitRelease:
    version: str  # "1.17.3"


@dataclass(frozen=True)
class Catalogue:
    drivers: tuple[DriverRelease, ...]
    cuda: tuple[CudaRelease, ...]
    cudnn: tuple[CudnnRelease, ...]
    nccl: tuple[NcclRelease, ...]
    dcgm: tuple[DcgmRelease, ...]
    container_toolkit: tuple[ContainerToolkitRelease, ...]


# To add a release, append a row to its tuple with NVIDIA's exact version strings (from the real
# repository's Packages file or `nvcc --version`); the package names follow from the row. The mirror's
# content hash covers this table, so the next `ensure_mirror_content()` builds a new mirror by itself.
# Several rows of one kind may share package names (NCCL, the drivers' Debian names and rpm names): apt and
# dnf then see several versions of one package, as in NVIDIA's repositories.
CATALOGUE = Catalogue(
    drivers=(
        DriverRelease(branch="535", version="535.216.03", cuda="12.2"),
        DriverRelease(branch="550", version="550.127.08", cuda="12.4"),
        DriverRelease(branch="570", version="570.124.06", cuda="12.8"),
    ),
    cuda=(
        CudaRelease(
            "12.2.2",
            nvcc_version="12.2.140",
            nvcc_build="33191640",
            nvcc_built_on="Tue_Aug_15_22:02:13_PDT_2023",
        ),
        CudaRelease(
            "12.4.1",
            nvcc_version="12.4.131",
            nvcc_build="34097967",
            nvcc_built_on="Thu_Mar_28_02:18:24_PDT_2024",
        ),
        CudaRelease(
            "12.6.3",
            nvcc_version="12.6.85",
            nvcc_build="35059454",
            nvcc_built_on="Tue_Oct_29_23:50:19_PDT_2024",
        ),
        CudaRelease(
            "12.8.1",
            nvcc_version="12.8.93",
            nvcc_build="35583870",
            nvcc_built_on="Fri_Feb_21_20:23:50_PST_2025",
        ),
    ),
    cudnn=(
        CudnnRelease(version="9.5.1.17", cuda="12"),
        CudnnRelease(version="8.9.7.29", cuda="12.2"),
    ),
    nccl=(
        NcclRelease(version="2.19.3", cuda="12.2"),
        NcclRelease(version="2.21.5", cuda="12.4"),
        NcclRelease(version="2.23.4", cuda="12.6"),
        NcclRelease(version="2.26.2", cuda="12.8"),
    ),
    dcgm=(DcgmRelease(version="3.3.9", epoch=1),),
    container_toolkit=(ContainerToolkitRelease(version="1.17.3"),),
)

# Simulated GPUs: the stand-in tools read this file on the test host (shell syntax, see nvidia-smi below).
# GPUPROV_STANDIN_GPUS_CONF overrides the path, which lets tests run the tools without touching /etc.
GPUS_CONF = "/etc/gpuprov/standin-gpus.conf"

# --------------------------------------------------------------------------------------------------------
# The package model


class Format(enum.Enum):
    DEB = "deb"
    RPM = "rpm"

    @property
    def libdir(self) -> str:
        return "/usr/lib/x86_64-linux-gnu" if self is Format.DEB else "/usr/lib64"


@dataclass(frozen=True)
class File:
    path: str  # absolute path on the host that installs the package
    content: bytes
    mode: int = 0o644


@dataclass(frozen=True)
class Link:
    path: str
    target: str  # relative, like the links in NVIDIA's packages


Entry = File | Link


@dataclass(frozen=True)
class Pin:
    """A dependency on exactly one version of another stand-in (or of a virtual name stand-ins provide)."""

    name: str
    evr: str


@dataclass(frozen=True)
class Package:
    format: Format
    name: str
    version: str  # upstream version: "550.127.08"
    release: str  # Debian revision / rpm Release: "1", "1+cuda12.4"; "" for none
    summary: str  # what the real package is; the control file adds that this is a stand-in
    entries: tuple[Entry, ...]
    epoch: int = 0
    # Each item is a list of alternatives (apt "a (= 1) | b (= 1)"); rpm packages use single pins only.
    depends: tuple[tuple[Pin, ...], ...] = ()
    provides: tuple[Pin, ...] = ()
    conflicts: tuple[str, ...] = ()
    # Packages of one group cannot be installed together (branches of the driver, open and proprietary
    # kernel modules): apt gets Provides, Conflicts and Replaces on the group name, so switching works.
    exclusive_group: str = ""

    @property
    def evr(self) -> str:
        """The full version as apt ("1:3.3.9", "550.127.08-1") and rpm ("1:3.3.9-1") write it."""
        epoch = f"{self.epoch}:" if self.epoch else ""
        release = f"-{self.release}" if self.release else ""
        return f"{epoch}{self.version}{release}"

    @property
    def runs_ldconfig(self) -> bool:
        return any(".so." in e.path.rsplit("/", 1)[-1] for e in self.entries if isinstance(e, File))


def exact(package: Package) -> tuple[Pin, ...]:
    return (Pin(package.name, package.evr),)


def deb_packages(catalogue: Catalogue) -> list[Package]:
    """Every stand-in of the apt repositories (Ubuntu and Debian names, as in NVIDIA's CUDA repos)."""
    return _packages(catalogue, Format.DEB)


def rpm_packages(catalogue: Catalogue) -> list[Package]:
    """Every stand-in of the rpm repositories (RHEL and Rocky names, as in NVIDIA's CUDA repos)."""
    return _packages(catalogue, Format.RPM)


def _packages(catalogue: Catalogue, fmt: Format) -> list[Package]:
    packages: list[Package] = []
    for d in catalogue.drivers:
        if fmt is Format.DEB:  # one apt repository holds both naming schemes; the names do not clash
            packages += _deb_driver(d) + _deb_driver_debian(d)
        else:
            packages += _rpm_driver(d)
    for c in catalogue.cuda:
        packages.append(_cuda_toolkit(c, fmt))
    for cudnn in catalogue.cudnn:
        packages += _cudnn(cudnn, fmt)
    for n in catalogue.nccl:
        packages += _nccl(n, fmt)
    for g in catalogue.dcgm:
        packages.append(_dcgm(g, fmt))
    for t in catalogue.container_toolkit:
        packages += _container_toolkit(t, fmt)
    return packages


def _package(
    fmt: Format,
    version: str,
    release: str,
    name: str,
    summary: str,
    entries: list[Entry],
    *,
    epoch: int = 0,
    depends: tuple[tuple[Pin, ...], ...] = (),
    provides: tuple[Pin, ...] = (),
    conflicts: tuple[str, ...] = (),
    exclusive_group: str = "",
) -> Package:
    """A Package with the STANDIN note that every stand-in carries."""
    note = File(f"/usr/share/doc/{name}/STANDIN", _standin_note(name, version).encode())
    return Package(
        fmt,
        name,
        version,
        release,
        summary,
        (*entries, note),
        epoch=epoch,
        depends=depends,
        provides=provides,
        conflicts=conflicts,
        exclusive_group=exclusive_group,
    )


def _standin_note(name: str, version: str) -> str:
    return (
        f"{name} {version} here is a gpuprov sandbox stand-in: it has the name and version of NVIDIA's "
        "package but carries small scripts and placeholder files, no NVIDIA software.\n"
    )


# --------------------------------------------------------------------------------------------------------
# Drivers


def _deb_driver(d: DriverRelease) -> list[Package]:
    fmt, b = Format.DEB, d.branch
    pkg = functools.partial(_package, fmt, d.version, "1")

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


def _deb_driver_debian(d: DriverRelease) -> list[Package]:
    """The driver with the names of NVIDIA's debian12 repository: Debian's names, the same for every branch.

    Each branch is another version of the same packages, and nvidia-driver-cuda (what NVIDIA's guide installs
    on a compute node, with the kernel modules) depends on the others at its own exact version. The packages
    conflict with the per-branch names above that carry the same files, as Debian's and Ubuntu's packages
    of one driver cannot be installed together.
    """
    fmt = Format.DEB
    pkg = functools.partial(_package, fmt, d.version, "1")
    libcuda = pkg(
        "libcuda1",
        "NVIDIA CUDA Driver Library",
        _library(fmt.libdir, "libcuda", d.version, soname_version="1", what=f"NVIDIA driver {d.version}"),
        conflicts=("libnvidia-compute",),
    )
    libnvidia_ml = pkg(
        "libnvidia-ml1",
        "NVIDIA Management Library (NVML) runtime library",
        _library(
            fmt.libdir, "libnvidia-ml", d.version, soname_version="1", what=f"NVIDIA driver {d.version}"
        ),
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


def _rpm_driver(d: DriverRelease) -> list[Package]:
    fmt, v = Format.RPM, d.version
    pkg = functools.partial(_package, fmt, v, "1")
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
        entries += _library(fmt.libdir, lib, d.version, soname_version="1", what=f"NVIDIA driver {d.version}")
    return entries


def _library(
    directory: str, lib: str, version: str, soname_version: str, what: str, dev_link: bool = False
) -> list[Entry]:
    """lib.so.<version> as a code-free ELF with the real soname, the soname link and maybe lib.so."""
    soname = f"{lib}.so.{soname_version}"
    real = f"{lib}.so.{version}"
    entries: list[Entry] = [
        File(f"{directory}/{real}", elf_shared_object(soname, f"gpuprov sandbox stand-in for {what}")),
    ]
    if real != soname:
        entries.append(Link(f"{directory}/{soname}", real))
    if dev_link:
        entries.append(Link(f"{directory}/{lib}.so", soname))
    return entries


def _nvidia_smi(d: DriverRelease) -> File:
    script = (
        _NVIDIA_SMI.replace("@VERSION@", d.version)
        .replace("@CUDA@", d.cuda)
        .replace("@CONF@", GPUS_CONF)
        .replace("@TABLE_HEAD@", _smi_table_head())
        .replace("@TABLE_PROCESSES@", _smi_table_processes())
    )
    return File("/usr/bin/nvidia-smi", script.encode(), 0o755)


def _persistenced(d: DriverRelease) -> list[Entry]:
    daemon = _NVIDIA_PERSISTENCED.replace("@VERSION@", d.version).replace("@CONF@", GPUS_CONF)
    unit = _unit("NVIDIA Persistence Daemon", "/usr/bin/nvidia-persistenced --verbose")
    return [
        File("/usr/bin/nvidia-persistenced", daemon.encode(), 0o755),
        File("/usr/lib/systemd/system/nvidia-persistenced.service", unit.encode()),
    ]


def _fabricmanager(d: DriverRelease) -> list[Entry]:
    config = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
    daemon = _NV_FABRICMANAGER.replace("@VERSION@", d.version).replace("@CONF@", GPUS_CONF)
    unit = _unit(
        "NVIDIA fabric manager service",
        f"/usr/bin/nv-fabricmanager -c {config}",
        after="network-online.target",
    )
    return [
        File("/usr/bin/nv-fabricmanager", daemon.encode(), 0o755),
        File("/usr/lib/systemd/system/nvidia-fabricmanager.service", unit.encode()),
        File(config, b"# gpuprov sandbox stand-in for the fabric manager configuration\nLOG_LEVEL=4\n"),
    ]


def _unit(description: str, exec_start: str, after: str = "") -> str:
    # Type=simple: the stand-in daemons stay in the foreground (the real ones fork).
    after_line = f"After={after}\n" if after else ""
    return (
        f"# gpuprov sandbox stand-in for NVIDIA's unit of the same name\n"
        f"[Unit]\nDescription={description} (gpuprov sandbox stand-in)\n{after_line}\n"
        f"[Service]\nType=simple\nExecStart={exec_start}\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


# --------------------------------------------------------------------------------------------------------
# CUDA toolkit, cuDNN, NCCL


def _cuda_toolkit(c: CudaRelease, fmt: Format) -> Package:
    home = f"/usr/local/cuda-{c.short}"  # never /usr/local/cuda: the role owns that link
    major, minor = (int(x) for x in c.version.split(".")[:2])
    nvcc = (
        _NVCC.replace("@SHORT@", c.short)
        .replace("@NVCC_VERSION@", c.nvcc_version)
        .replace("@BUILD@", c.nvcc_build)
        .replace("@BUILT_ON@", c.nvcc_built_on)
        .replace("@YEAR@", c.nvcc_built_on[-4:])
    )
    cuda_h = _header(f"CUDA {c.version} driver API", {"CUDA_VERSION": str(major * 1000 + minor * 10)})
    version_json = json.dumps({"cuda": {"name": "CUDA SDK", "version": c.version}}, indent=3) + "\n"
    entries: list[Entry] = [
        File(f"{home}/bin/nvcc", nvcc.encode(), 0o755),
        File(f"{home}/version.json", version_json.encode()),
        File(f"{home}/include/cuda.h", cuda_h.encode()),
        *_library(
            f"{home}/lib64",
            "libcudart",
            c.version,
            soname_version=str(major),
            what=f"the CUDA {c.version} runtime",
            dev_link=True,
        ),
    ]
    name = f"cuda-toolkit-{major}-{minor}"
    return _package(fmt, c.version, "1", name, f"CUDA Toolkit {c.version}", entries)


def _cudnn(c: CudnnRelease, fmt: Format) -> list[Package]:
    major, minor, patch = c.version.split(".")[:3]
    if int(major) >= 9:  # cuDNN 9 is packaged per CUDA major version
        dev_word = "dev" if fmt is Format.DEB else "devel"
        runtime_name = f"libcudnn{major}-cuda-{c.cuda}"
        dev_name = f"libcudnn{major}-{dev_word}-cuda-{c.cuda}"
        release = "1"
        code = "CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL"
    else:  # cuDNN 8 has one package name; the CUDA minor is in the release ("1+cuda12.2", "1.cuda12.2")
        runtime_name = f"libcudnn{major}"
        dev_name = f"libcudnn{major}-dev" if fmt is Format.DEB else f"libcudnn{major}-devel"
        release = f"1+cuda{c.cuda}" if fmt is Format.DEB else f"1.cuda{c.cuda}"
        code = "CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL"
    what = f"cuDNN {c.version} for CUDA {c.cuda}"
    defines = {"CUDNN_MAJOR": major, "CUDNN_MINOR": minor, "CUDNN_PATCHLEVEL": patch}
    defines["CUDNN_VERSION"] = f"({code})"
    runtime = _package(
        fmt,
        c.version,
        release,
        runtime_name,
        f"cuDNN runtime libraries ({what})",
        _library(fmt.libdir, "libcudnn", f"{major}.{minor}.{patch}", major, what),
    )
    dev_entries: list[Entry] = [
        File("/usr/include/cudnn_version.h", _header(what, defines).encode()),
        Link(f"{fmt.libdir}/libcudnn.so", f"libcudnn.so.{major}"),
    ]
    # Both majors' headers are /usr/include/cudnn_version.h, so their dev packages exclude each other.
    dev = _package(
        fmt,
        c.version,
        release,
        dev_name,
        f"cuDNN development files ({what})",
        dev_entries,
        depends=(exact(runtime),),
        exclusive_group="libcudnn-dev",
    )
    return [runtime, dev]


def _nccl(n: NcclRelease, fmt: Format) -> list[Package]:
    major, minor, patch = n.version.split(".")
    release = f"1+cuda{n.cuda}"
    what = f"NCCL {n.version} for CUDA {n.cuda}"
    deb = fmt is Format.DEB
    runtime_name, dev_name = ("libnccl2", "libnccl-dev") if deb else ("libnccl", "libnccl-devel")
    runtime = _package(
        fmt,
        n.version,
        release,
        runtime_name,
        f"NVIDIA collective communications ({what})",
        _library(fmt.libdir, "libnccl", n.version, major, what),
    )
    defines = {
        "NCCL_MAJOR": major,
        "NCCL_MINOR": minor,
        "NCCL_PATCH": patch,
        "NCCL_SUFFIX": '""',
        "NCCL_VERSION_CODE": str(int(major) * 10000 + int(minor) * 100 + int(patch)),
    }
    dev_entries: list[Entry] = [
        File("/usr/include/nccl.h", _header(what, defines).encode()),
        Link(f"{fmt.libdir}/libnccl.so", f"libnccl.so.{major}"),
    ]
    dev = _package(
        fmt,
        n.version,
        release,
        dev_name,
        f"NCCL development files ({what})",
        dev_entries,
        depends=(exact(runtime),),
    )
    return [runtime, dev]


def _header(what: str, defines: dict[str, str]) -> str:
    guard = "GPUPROV_STANDIN_" + "_".join(sorted(defines))[:40]
    lines = [
        f"/* gpuprov sandbox stand-in: the version defines of {what}, nothing else. */",
        f"#ifndef {guard}",
        f"#define {guard}",
    ]
    lines += [f"#define {name} {value}" for name, value in defines.items()]
    lines.append(f"#endif /* {guard} */")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------
# DCGM and the container toolkit


def _dcgm(g: DcgmRelease, fmt: Format) -> Package:
    dcgmi = _DCGMI.replace("@VERSION@", g.version).replace("@CONF@", GPUS_CONF)
    hostengine = _NV_HOSTENGINE.replace("@VERSION@", g.version)
    entries: list[Entry] = [
        File("/usr/bin/dcgmi", dcgmi.encode(), 0o755),
        File("/usr/bin/nv-hostengine", hostengine.encode(), 0o755),
        File(
            "/usr/lib/systemd/system/nvidia-dcgm.service",
            _unit("NVIDIA DCGM service", "/usr/bin/nv-hostengine -n").encode(),
        ),
    ]
    release = "" if fmt is Format.DEB else "1"  # NVIDIA's .deb is "1:3.3.9", its rpm "1:3.3.9-1"
    return _package(
        fmt,
        g.version,
        release,
        "datacenter-gpu-manager",
        "NVIDIA Data Center GPU Manager",
        entries,
        epoch=g.epoch,
    )


def _container_toolkit(t: ContainerToolkitRelease, fmt: Format) -> list[Package]:
    ctk = _NVIDIA_CTK.replace("@VERSION@", t.version)
    config = (
        "# gpuprov sandbox stand-in for /etc/nvidia-container-runtime/config.toml\n"
        '[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n\n'
        '[nvidia-container-runtime]\nmode = "auto"\nruntimes = ["runc"]\n'
    )
    base_entries: list[Entry] = [
        File("/usr/bin/nvidia-ctk", ctk.encode(), 0o755),
        File(
            "/usr/bin/nvidia-container-runtime",
            _NVIDIA_CONTAINER_RUNTIME.replace("@VERSION@", t.version).encode(),
            0o755,
        ),
        File("/etc/nvidia-container-runtime/config.toml", config.encode()),
    ]
    base = _package(
        fmt, t.version, "1", "nvidia-container-toolkit-base", "NVIDIA Container Toolkit Base", base_entries
    )
    hook = _NVIDIA_CONTAINER_RUNTIME_HOOK.replace("@VERSION@", t.version)
    toolkit = _package(
        fmt,
        t.version,
        "1",
        "nvidia-container-toolkit",
        "NVIDIA Container Toolkit",
        [File("/usr/bin/nvidia-container-runtime-hook", hook.encode(), 0o755)],
        depends=(exact(base),),
    )
    return [base, toolkit]


# --------------------------------------------------------------------------------------------------------
# A shared library without code


def elf_shared_object(soname: str, note: str) -> bytes:
    """A minimal x86-64 ELF shared library with a soname and no symbols or code.

    ldconfig indexes it under its soname and dlopen() loads it, as with the real library; any symbol lookup
    fails. The note lands in the string table, so `strings` on the file says what it is.
    """
    strtab = b"\0" + soname.encode() + b"\0" + note.encode() + b"\0"
    header_size, phdr_size, phdr_count = 64, 56, 3
    strtab_at = header_size + phdr_size * phdr_count
    symtab_at = _align(strtab_at + len(strtab), 8)
    hash_at = symtab_at + 24  # one null symbol
    dynamic_at = _align(hash_at + 16, 8)  # DT_HASH: nbucket=1, nchain=1, bucket[0]=0, chain[0]=0
    dynamic = [(4, hash_at), (5, strtab_at), (6, symtab_at), (10, len(strtab)), (11, 24), (14, 1), (0, 0)]
    total = dynamic_at + 16 * len(dynamic)

    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # 64-bit, little-endian, System V
    out = bytearray(ident)
    out += struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, header_size, 0, 0, header_size, phdr_size, phdr_count, 64, 0, 0
    )  # ET_DYN, EM_X86_64, no section headers
    read_write = 6  # writable: the dynamic loader relocates the dynamic section in place
    out += struct.pack("<IIQQQQQQ", 1, read_write, 0, 0, 0, total, total, 0x1000)  # PT_LOAD
    out += struct.pack(
        "<IIQQQQQQ",
        2,
        read_write,
        dynamic_at,
        dynamic_at,
        dynamic_at,
        16 * len(dynamic),
        16 * len(dynamic),
        8,
    )  # PT_DYNAMIC
    out += struct.pack("<IIQQQQQQ", 0x6474E551, read_write, 0, 0, 0, 0, 0, 16)  # PT_GNU_STACK: not executable
    out += strtab
    out += bytes(symtab_at - len(out)) + bytes(24)
    out += struct.pack("<IIII", 1, 1, 0, 0)
    out += bytes(dynamic_at - len(out))
    for tag, value in dynamic:
        out += struct.pack("<qQ", tag, value)
    assert len(out) == total
    return bytes(out)


def _align(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment


# --------------------------------------------------------------------------------------------------------
# The stand-in programs (POSIX sh: the test hosts' /bin/sh is dash). @NAME@ is filled in per package.

_SH_CONF = """\
CONF="${GPUPROV_STANDIN_GPUS_CONF:-@CONF@}"
HAVE_GPUS=0
GPU_COUNT=1
GPU_NAME="NVIDIA H100 80GB HBM3"
MEMORY_MIB=81559
COMPUTE_CAP=9.0
NVSWITCH_COUNT=0
if [ -r "$CONF" ]; then
    . "$CONF"
    HAVE_GPUS=1
fi
"""

_NVIDIA_SMI = (
    """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-smi from driver @VERSION@: a shell script, no NVIDIA code.
# Like the real tool on a host without a GPU it prints "No devices were found" and exits 6, unless
# @CONF@ (or the file named by $GPUPROV_STANDIN_GPUS_CONF) describes simulated GPUs, e.g.
#   GPU_COUNT=2
#   GPU_NAME="NVIDIA H100 80GB HBM3"
#   MEMORY_MIB=81559
# Then it answers the summary table, -L, --query-gpu=...,--format=csv[,noheader][,nounits], -i and -pm.
DRIVER_VERSION="@VERSION@"
CUDA_VERSION="@CUDA@"
PM_STATE=/run/gpuprov-standin/persistence-mode
"""
    + _SH_CONF
    + """
usage() {
    cat <<EOF
NVIDIA System Management Interface -- v$DRIVER_VERSION (gpuprov sandbox stand-in, not NVIDIA software)

Implemented:
    nvidia-smi                       summary table
    nvidia-smi -L                    list the GPUs
    nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]
        FIELDS: index count name uuid driver_version pci.bus_id memory.total memory.used
                memory.free persistence_mode compute_cap utilization.gpu temperature.gpu
    nvidia-smi -i N ...              only GPU N
    nvidia-smi -pm 0|1               persistence mode
    nvidia-smi --version
Simulated GPUs come from $CONF (GPU_COUNT, GPU_NAME, MEMORY_MIB, COMPUTE_CAP).
EOF
}

invalid() {
    echo "$1" >&2
    echo "Please run 'nvidia-smi -h' for help." >&2
    exit 2
}

gpu_uuid() {
    # Stable per host and index, in the real "GPU-8-4-4-4-12" form.
    printf '%s-gpu-%s' "$(uname -n)" "$1" | md5sum | \\
        sed 's/^\\(........\\)\\(....\\)\\(....\\)\\(....\\)\\(............\\).*/GPU-\\1-\\2-\\3-\\4-\\5/'
}

bus_id() {
    printf '00000000:%02X:00.0' $((0x18 + $1 * 0x10))
}

persistence_mode() {
    if [ -e "$PM_STATE" ]; then echo Enabled; else echo Disabled; fi
}

gpu_indices() {
    if [ -n "$SELECTED" ]; then
        echo "$SELECTED"
        return
    fi
    i=0
    while [ "$i" -lt "$GPU_COUNT" ]; do
        echo "$i"
        i=$((i + 1))
    done
}

field_header() {
    case "$1" in
        gpu_name) echo name ;;
        gpu_uuid) echo uuid ;;
        gpu_bus_id) echo pci.bus_id ;;
        memory.total|memory.used|memory.free) echo "$1 [MiB]" ;;
        utilization.gpu) echo "$1 [%]" ;;
        *) echo "$1" ;;
    esac
}

field_value() {
    case "$1" in
        index) echo "$2" ;;
        count) echo "$GPU_COUNT" ;;
        name|gpu_name) echo "$GPU_NAME" ;;
        uuid|gpu_uuid) gpu_uuid "$2" ;;
        driver_version) echo "$DRIVER_VERSION" ;;
        pci.bus_id|gpu_bus_id) bus_id "$2" ;;
        memory.total) echo "$MEMORY_MIB$MIB" ;;
        memory.used) echo "0$MIB" ;;
        memory.free) echo "$MEMORY_MIB$MIB" ;;
        persistence_mode) persistence_mode ;;
        compute_cap) echo "$COMPUTE_CAP" ;;
        utilization.gpu) echo "0$PERCENT" ;;
        temperature.gpu) echo 30 ;;
        *) return 1 ;;
    esac
}

query_csv() {
    fields=$(echo "$QUERY" | tr ',' ' ')
    for f in $fields; do
        field_value "$f" 0 >/dev/null || invalid "Field \\"$f\\" is not a valid field to query."
    done
    if [ "$HEADER" = 1 ]; then
        line=""
        for f in $fields; do line="${line:+$line, }$(field_header "$f")"; done
        echo "$line"
    fi
    for i in $(gpu_indices); do
        line=""
        for f in $fields; do line="${line:+$line, }$(field_value "$f" "$i")"; done
        echo "$line"
    done
}

list_gpus() {
    for i in $(gpu_indices); do
        echo "GPU $i: $GPU_NAME (UUID: $(gpu_uuid "$i"))"
    done
}

summary() {
    date '+%a %b %e %H:%M:%S %Y'
    echo "+-----------------------------------------------------------------------------------------+"
    printf '| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-8s |\\n' \\
        "$DRIVER_VERSION" "$DRIVER_VERSION" "$CUDA_VERSION"
    cat <<'EOF'
@TABLE_HEAD@
EOF
    for i in $(gpu_indices); do
        pm=On
        [ "$(persistence_mode)" = Enabled ] || pm=Off
        printf '| %3d  %-28.28s %4s  | %18s %-3s | %20s |\\n' "$i" "$GPU_NAME" "$pm" "$(bus_id "$i")" Off 0
        printf '| N/A   30C    P0%16s / %5s |%11s / %9s |%8s %12s |\\n' \\
            70W 700W 0MiB "${MEMORY_MIB}MiB" 0% Default
        printf '| %39s | %22s | %20s |\\n' "" "" Disabled
        echo "+-----------------------------------------+------------------------+----------------------+"
    done
    cat <<'EOF'
@TABLE_PROCESSES@
EOF
}

set_persistence_mode() {
    case "$1" in
        1|ENABLED|Enabled) word=Enabled ;;
        0|DISABLED|Disabled) word=Disabled ;;
        *) invalid "Invalid persistence mode: $1" ;;
    esac
    if [ "$(id -u)" != 0 ]; then
        echo "Unable to set persistence mode: Insufficient Permissions" >&2
        exit 4
    fi
    mkdir -p "$(dirname "$PM_STATE")"
    if [ "$word" = Enabled ]; then touch "$PM_STATE"; else rm -f "$PM_STATE"; fi
    for i in $(gpu_indices); do
        echo "$word persistence mode for GPU $(bus_id "$i")."
    done
    echo "All done."
}

MODE=summary
QUERY=""
FORMAT=""
SELECTED=""
PM=""
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --version)
            echo "NVIDIA-SMI version  : $DRIVER_VERSION"
            echo "NVML version        : ${DRIVER_VERSION%.*}"
            if [ "$HAVE_GPUS" = 1 ]; then
                echo "DRIVER version      : $DRIVER_VERSION"
                echo "CUDA Version        : $CUDA_VERSION"
            fi
            exit 0 ;;
        -L|--list-gpus) MODE=list ;;
        --query-gpu=*) MODE=query; QUERY=${1#--query-gpu=} ;;
        --query-gpu) MODE=query; shift; QUERY=$1 ;;
        --format=*) FORMAT=${1#--format=} ;;
        --format) shift; FORMAT=$1 ;;
        -i|--id) shift; SELECTED=$1 ;;
        --id=*) SELECTED=${1#--id=} ;;
        -pm|--persistence-mode) MODE=pm; shift; PM=$1 ;;
        --persistence-mode=*) MODE=pm; PM=${1#--persistence-mode=} ;;
        *) invalid "Invalid combination of input arguments (this stand-in does not implement '$1')." ;;
    esac
    shift
done

HEADER=1
MIB=" MiB"
PERCENT=" %"
if [ "$MODE" = query ]; then
    case ",$FORMAT," in
        *,csv,*) ;;
        *) invalid "The --query-gpu option needs --format=csv[,noheader][,nounits]." ;;
    esac
    case ",$FORMAT," in *,noheader,*) HEADER=0 ;; esac
    case ",$FORMAT," in *,nounits,*) MIB=""; PERCENT="" ;; esac
fi

if [ "$HAVE_GPUS" != 1 ] || [ "$GPU_COUNT" -lt 1 ]; then
    echo "No devices were found"
    exit 6
fi
if [ -n "$SELECTED" ] && ! [ "$SELECTED" -lt "$GPU_COUNT" ] 2>/dev/null; then
    echo "No devices were found"
    exit 6
fi

case "$MODE" in
    list) list_gpus ;;
    query) query_csv ;;
    pm) set_persistence_mode "$PM" ;;
    *) summary ;;
esac
"""
)


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


_NVIDIA_PERSISTENCED = (
    """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-persistenced @VERSION@: a shell script, no NVIDIA code.
# Like the real daemon it cannot start without GPUs; with simulated GPUs (@CONF@) it stays in the
# foreground doing nothing until stopped.
"""
    + _SH_CONF
    + """
case "$1" in
    -h|--help) echo "nvidia-persistenced (gpuprov sandbox stand-in for version @VERSION@)"; exit 0 ;;
    -v|--version) echo "nvidia-persistenced:  version @VERSION@ (gpuprov sandbox stand-in)"; exit 0 ;;
esac
if [ "$HAVE_GPUS" != 1 ]; then
    echo "nvidia-persistenced failed to initialize: no NVIDIA devices (stand-in; see $CONF)." >&2
    exit 1
fi
echo "nvidia-persistenced (gpuprov sandbox stand-in) managing $GPU_COUNT simulated GPU(s)"
exec sleep infinity
"""
)

_NV_FABRICMANAGER = (
    """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nv-fabricmanager @VERSION@: a shell script, no NVIDIA code.
# Fabric manager only runs on NVSwitch systems: it starts when @CONF@ sets NVSWITCH_COUNT above 0.
"""
    + _SH_CONF
    + """
case "$1" in
    -h|--help) echo "nv-fabricmanager (gpuprov sandbox stand-in for version @VERSION@)"; exit 0 ;;
    -v|--version) echo "Fabric Manager version is : @VERSION@"; exit 0 ;;
esac
if [ "$HAVE_GPUS" != 1 ] || [ "$NVSWITCH_COUNT" -lt 1 ]; then
    echo "NVIDIA Fabric Manager (stand-in): no NVSwitch devices found (NVSWITCH_COUNT in $CONF)." >&2
    exit 1
fi
echo "NVIDIA Fabric Manager (gpuprov sandbox stand-in) managing $NVSWITCH_COUNT simulated NVSwitch(es)"
exec sleep infinity
"""
)

_NVCC = """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvcc from CUDA @SHORT@: it reports the real version, and compiles
# nothing.
case "$1" in
    --version|-V)
        cat <<'EOF'
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-@YEAR@ NVIDIA Corporation
Built on @BUILT_ON@
Cuda compilation tools, release @SHORT@, V@NVCC_VERSION@
Build cuda_@SHORT@.r@SHORT@/compiler.@BUILD@_0
EOF
        exit 0 ;;
esac
echo "nvcc fatal   : this is a gpuprov sandbox stand-in for nvcc @NVCC_VERSION@; it cannot compile" >&2
exit 1
"""

_DCGMI = (
    """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's dcgmi @VERSION@: a shell script, no NVIDIA code.
"""
    + _SH_CONF
    + """
case "$1 $2" in
    "--version "*|"-v "*) echo "dcgmi  version: @VERSION@"; exit 0 ;;
    "discovery -l")
        [ "$HAVE_GPUS" = 1 ] || GPU_COUNT=0
        echo "$GPU_COUNT GPU(s) found."
        i=0
        while [ "$i" -lt "$GPU_COUNT" ]; do
            echo "GPU ID: $i  Name: $GPU_NAME"
            i=$((i + 1))
        done
        exit 0 ;;
esac
echo "dcgmi (gpuprov sandbox stand-in) implements only --version and 'discovery -l'" >&2
exit 1
"""
)

_NV_HOSTENGINE = """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nv-hostengine (DCGM @VERSION@): stays in the foreground, does nothing.
case "$1" in
    --version|-v) echo "nv-hostengine version: @VERSION@ (gpuprov sandbox stand-in)"; exit 0 ;;
esac
exec sleep infinity
"""

_NVIDIA_CTK = """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-ctk @VERSION@: a shell script, no NVIDIA code.
# Implemented: --version, and `runtime configure --runtime=docker [--config=F] [--set-as-default]`, which
# registers the nvidia runtime in Docker's daemon.json as the real one does.
case "$1" in
    --version|-v)
        echo "NVIDIA Container Toolkit CLI version @VERSION@"
        echo "commit: gpuprov-sandbox-stand-in"
        exit 0 ;;
esac
if [ "$1 $2" != "runtime configure" ]; then
    echo "nvidia-ctk (gpuprov sandbox stand-in) implements only --version and 'runtime configure'" >&2
    exit 1
fi
shift 2
exec python3 - "$@" <<'EOF'
import json, os, sys
runtime, config, default = "docker", "/etc/docker/daemon.json", False
for arg in sys.argv[1:]:
    if arg.startswith("--runtime="):
        runtime = arg.split("=", 1)[1]
    elif arg.startswith("--config="):
        config = arg.split("=", 1)[1]
    elif arg == "--set-as-default":
        default = True
if runtime != "docker":
    sys.exit("nvidia-ctk (gpuprov sandbox stand-in) configures only --runtime=docker")
settings = {}
if os.path.exists(config):
    with open(config) as f:
        settings = json.load(f)
settings.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
if default:
    settings["default-runtime"] = "nvidia"
os.makedirs(os.path.dirname(config) or ".", exist_ok=True)
with open(config, "w") as f:
    json.dump(settings, f, indent=4)
    f.write("\\n")
print("INFO Wrote updated config to " + config)
print("INFO It is recommended that docker daemon be restarted.")
EOF
"""

_NVIDIA_CONTAINER_RUNTIME = """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-container-runtime @VERSION@: with no GPUs to inject it does
# what the real one does for a container that requests none, and hands over to runc.
exec runc "$@"
"""

_NVIDIA_CONTAINER_RUNTIME_HOOK = """\
#!/bin/sh
# gpuprov sandbox stand-in for NVIDIA's nvidia-container-runtime-hook @VERSION@: there are no GPUs to inject.
exit 0
"""


# --------------------------------------------------------------------------------------------------------
# A stand-in Miniforge installer, served by the mirror for the python_env role's conda path: the real one
# (about 80 MiB, from GitHub) cannot be downloaded here. It supports exactly what the role uses: the
# installer's batch mode (`-b -p PREFIX`), and `conda --version` and `conda create --yes --prefix P
# --override-channels --channel=C... python=X.Y`, which makes a venv of the host's Python X.Y (stand-in
# for conda's Python) that pip then fills as in a real conda environment.

CONDA_INSTALLER_NAME = "Miniforge3-24.11.3-0-Linux-x86_64.sh"
CONDA_VERSION = "24.11.3"

_CONDA = """\
#!/bin/sh
# gpuprov sandbox stand-in for conda @VERSION@ (Miniforge): a shell script, no conda code. It implements
# `conda --version` and `conda create --yes --prefix P [--override-channels] [--channel=C]... python=X.Y`,
# which makes a venv of the host's /usr/bin/pythonX.Y in place of conda's Python.
set -eu
case "${1:-}" in
    --version|-V) echo "conda @VERSION@"; exit 0 ;;
    create) shift ;;
    *) echo "conda (gpuprov sandbox stand-in) implements only --version and create" >&2; exit 2 ;;
esac
prefix=""
python=""
yes=0
while [ $# -gt 0 ]; do
    case "$1" in
        -y|--yes) yes=1 ;;
        -p|--prefix) shift; prefix=$1 ;;
        --prefix=*) prefix=${1#--prefix=} ;;
        -c|--channel) shift ;;
        --channel=*|--override-channels|-q|--quiet) ;;
        python=*) python=${1#python=} ;;
        *) echo "PackagesNotFoundError: $1 (this conda stand-in installs only python=X.Y)" >&2; exit 1 ;;
    esac
    shift
done
if [ -z "$prefix" ] || [ "$yes" != 1 ]; then
    echo "conda create (gpuprov sandbox stand-in): needs --yes and --prefix PATH" >&2
    exit 2
fi
if [ -e "$prefix" ]; then
    echo "CondaValueError: prefix already exists: $prefix" >&2
    exit 1
fi
interpreter=/usr/bin/python${python:-3}
if [ ! -x "$interpreter" ]; then
    echo "PackagesNotFoundError: python=$python (this stand-in uses the host's $interpreter, missing)" >&2
    exit 1
fi
"$interpreter" -m venv "$prefix"
mkdir -p "$prefix/conda-meta"
echo "python=$python via $interpreter (gpuprov sandbox stand-in for conda @VERSION@)" \\
    > "$prefix/conda-meta/history"
echo "done"
"""

_CONDA_INSTALLER = """\
#!/bin/sh
# gpuprov sandbox stand-in for the Miniforge3 @VERSION@-0 installer (Linux x86_64): a shell script, no conda
# code. It implements batch mode, `-b -p PREFIX`, and installs a stand-in `conda` (see PREFIX/STANDIN).
set -eu
batch=0
prefix="${HOME}/miniforge3"
while getopts "bhp:" option; do
    case "$option" in
        b) batch=1 ;;
        p) prefix=$OPTARG ;;
        h) echo "usage: $0 -b [-p PREFIX]  (gpuprov sandbox stand-in for Miniforge3)"; exit 0 ;;
        *) exit 2 ;;
    esac
done
if [ "$batch" != 1 ]; then
    echo "this gpuprov sandbox stand-in installs in batch mode only (-b)" >&2
    exit 2
fi
if [ -e "$prefix" ]; then
    echo "ERROR: File or directory already exists: '$prefix'" >&2
    exit 1
fi
echo "PREFIX=$prefix"
mkdir -p "$prefix/bin" "$prefix/conda-meta" "$prefix/envs"
cat > "$prefix/bin/conda" <<'CONDA_SCRIPT'
@CONDA@CONDA_SCRIPT
chmod 0755 "$prefix/bin/conda"
echo "Miniforge3 @VERSION@-0 here is a gpuprov sandbox stand-in: conda is a small shell script." \
    > "$prefix/STANDIN"
echo "installation finished."
"""


def conda_installer() -> bytes:
    """The stand-in Miniforge installer the mirror serves at conda/<CONDA_INSTALLER_NAME>."""
    conda = _CONDA.replace("@VERSION@", CONDA_VERSION)
    return _CONDA_INSTALLER.replace("@VERSION@", CONDA_VERSION).replace("@CONDA@", conda).encode()


def conda_installer_sha256() -> str:
    return hashlib.sha256(conda_installer()).hexdigest()
