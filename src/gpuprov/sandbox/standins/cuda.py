"""The stand-ins of what runs on the driver: the CUDA toolkit, cuDNN and NCCL."""

from __future__ import annotations

import json

from gpuprov.sandbox.standins.catalogue import CudaRelease, CudnnRelease, NcclRelease
from gpuprov.sandbox.standins.model import Entry, File, Format, Link, Package, Pin, exact
from gpuprov.sandbox.standins.parts import header, library, package
from gpuprov.sandbox.standins.shell import program

# NVIDIA's toolkit layout: the libraries live in /usr/local/cuda-X.Y/targets/x86_64-linux/lib and lib64 is
# a link to that directory; the dynamic linker learns of them through /etc/ld.so.conf.d/000_cuda.conf
# (package cuda-toolkit-config-common: "/usr/local/cuda/targets/x86_64-linux/lib") and 988_cuda-<major>.conf
# (cuda-toolkit-<major>-config-common: "/usr/local/cuda-12/targets/x86_64-linux/lib"), both Architecture all
# and versioned like the runtime ("cuda-toolkit-12-4-config-common-12.4.127-1.noarch"). Sources: hosts'
# `ls /etc/ld.so.conf.d` and `cat` of both files (41 and 44 bytes) quoted in public threads, e.g.
# charliecloud's `ch-fromhost --nvidia` output naming 988_cuda-12.conf and 000_cuda.conf, and package
# listings of cuda-toolkit-config-common 12.6.68-1 all / 12.8.90-1.noarch. The stand-in folds the toolkit's
# many packages (cuda-cudart-12-4 and the rest, which depend on the config packages) into one.
TARGET_LIB = "targets/x86_64-linux/lib"


def cuda_toolkit(c: CudaRelease, fmt: Format) -> list[Package]:
    home = f"/usr/local/cuda-{c.short}"  # never /usr/local/cuda: the role owns that link
    major, minor = (int(x) for x in c.version.split(".")[:2])
    nvcc = program(
        "nvcc.sh",
        SHORT=c.short,
        NVCC_VERSION=c.nvcc_version,
        BUILD=c.nvcc_build,
        BUILT_ON=c.nvcc_built_on,
        YEAR=c.nvcc_built_on[-4:],
    )
    cuda_h = header(f"CUDA {c.version} driver API", {"CUDA_VERSION": str(major * 1000 + minor * 10)})
    version_json = json.dumps({"cuda": {"name": "CUDA SDK", "version": c.version}}, indent=3) + "\n"
    configs = [
        _config_package(fmt, "cuda-toolkit-config-common", c, "000_cuda.conf", "/usr/local/cuda"),
        _config_package(
            fmt,
            f"cuda-toolkit-{major}-config-common",
            c,
            f"988_cuda-{major}.conf",
            f"/usr/local/cuda-{major}",
        ),
    ]
    entries: list[Entry] = [
        File(f"{home}/bin/nvcc", nvcc, 0o755),
        File(f"{home}/version.json", version_json.encode()),
        File(f"{home}/include/cuda.h", cuda_h.encode()),
        Link(f"{home}/lib64", TARGET_LIB),
        *library(
            f"{home}/{TARGET_LIB}",
            "libcudart",
            c.version,
            soname_version=str(major),
            what=f"the CUDA {c.version} runtime",
            dev_link=True,
        ),
    ]
    name = f"cuda-toolkit-{major}-{minor}"
    depends = tuple((Pin(config.name, ""),) for config in configs)
    toolkit = package(fmt, c.version, "1", name, f"CUDA Toolkit {c.version}", entries, depends=depends)
    return [toolkit, *configs]


def _config_package(fmt: Format, name: str, c: CudaRelease, conf: str, link: str) -> Package:
    entry = File(f"/etc/ld.so.conf.d/{conf}", f"{link}/{TARGET_LIB}\n".encode())
    summary = f"Common config package for CUDA Toolkit {c.short}"
    return package(fmt, c.cudart_version, "1", name, summary, [entry], arch_independent=True)


def cudnn(c: CudnnRelease, fmt: Format) -> list[Package]:
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
    runtime = package(
        fmt,
        c.version,
        release,
        runtime_name,
        f"cuDNN runtime libraries ({what})",
        library(fmt.libdir, "libcudnn", f"{major}.{minor}.{patch}", major, what),
    )
    dev_entries: list[Entry] = [
        File("/usr/include/cudnn_version.h", header(what, defines).encode()),
        Link(f"{fmt.libdir}/libcudnn.so", f"libcudnn.so.{major}"),
    ]
    # Both majors' headers are /usr/include/cudnn_version.h, so their dev packages exclude each other.
    dev = package(
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


def nccl(n: NcclRelease, fmt: Format) -> list[Package]:
    major, minor, patch = n.version.split(".")
    release = f"1+cuda{n.cuda}"
    what = f"NCCL {n.version} for CUDA {n.cuda}"
    deb = fmt is Format.DEB
    runtime_name, dev_name = ("libnccl2", "libnccl-dev") if deb else ("libnccl", "libnccl-devel")
    runtime = package(
        fmt,
        n.version,
        release,
        runtime_name,
        f"NVIDIA collective communications ({what})",
        library(fmt.libdir, "libnccl", n.version, major, what),
    )
    defines = {
        "NCCL_MAJOR": major,
        "NCCL_MINOR": minor,
        "NCCL_PATCH": patch,
        "NCCL_SUFFIX": '""',
        "NCCL_VERSION_CODE": str(int(major) * 10000 + int(minor) * 100 + int(patch)),
    }
    dev_entries: list[Entry] = [
        File("/usr/include/nccl.h", header(what, defines).encode()),
        Link(f"{fmt.libdir}/libnccl.so", f"libnccl.so.{major}"),
    ]
    dev = package(
        fmt,
        n.version,
        release,
        dev_name,
        f"NCCL development files ({what})",
        dev_entries,
        depends=(exact(runtime),),
    )
    return [runtime, dev]
