"""The stand-ins of what runs on the driver: the CUDA toolkit, cuDNN and NCCL."""

from __future__ import annotations

import json

from gpuprov.sandbox.standins.catalogue import CudaRelease, CudnnRelease, NcclRelease
from gpuprov.sandbox.standins.model import Entry, File, Format, Link, Package, exact
from gpuprov.sandbox.standins.parts import header, library, package
from gpuprov.sandbox.standins.shell import program


def cuda_toolkit(c: CudaRelease, fmt: Format) -> Package:
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
    entries: list[Entry] = [
        File(f"{home}/bin/nvcc", nvcc, 0o755),
        File(f"{home}/version.json", version_json.encode()),
        File(f"{home}/include/cuda.h", cuda_h.encode()),
        *library(
            f"{home}/lib64",
            "libcudart",
            c.version,
            soname_version=str(major),
            what=f"the CUDA {c.version} runtime",
            dev_link=True,
        ),
    ]
    name = f"cuda-toolkit-{major}-{minor}"
    return package(fmt, c.version, "1", name, f"CUDA Toolkit {c.version}", entries)


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
