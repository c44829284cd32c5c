"""The stand-ins of NVIDIA's GPU tools: DCGM and the container toolkit."""

from __future__ import annotations

from gpuprov.sandbox.standins.catalogue import ContainerToolkitRelease, DcgmRelease
from gpuprov.sandbox.standins.model import Entry, File, Format, Package, exact
from gpuprov.sandbox.standins.parts import package, unit
from gpuprov.sandbox.standins.shell import GPUS_CONF, program


def dcgm(g: DcgmRelease, fmt: Format) -> Package:
    dcgmi = program("dcgmi.sh", VERSION=g.version, CONF=GPUS_CONF)
    hostengine = program("nv-hostengine.sh", VERSION=g.version)
    entries: list[Entry] = [
        File("/usr/bin/dcgmi", dcgmi, 0o755),
        File("/usr/bin/nv-hostengine", hostengine, 0o755),
        File(
            "/usr/lib/systemd/system/nvidia-dcgm.service",
            unit("NVIDIA DCGM service", "/usr/bin/nv-hostengine -n").encode(),
        ),
    ]
    release = "" if fmt is Format.DEB else "1"  # NVIDIA's .deb is "1:3.3.9", its rpm "1:3.3.9-1"
    return package(
        fmt,
        g.version,
        release,
        "datacenter-gpu-manager",
        "NVIDIA Data Center GPU Manager",
        entries,
        epoch=g.epoch,
    )


def container_toolkit(t: ContainerToolkitRelease, fmt: Format) -> list[Package]:
    ctk = program("nvidia-ctk.sh", VERSION=t.version)
    config = (
        "# gpuprov sandbox stand-in for /etc/nvidia-container-runtime/config.toml\n"
        '[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n\n'
        '[nvidia-container-runtime]\nmode = "auto"\nruntimes = ["runc"]\n'
    )
    base_entries: list[Entry] = [
        File("/usr/bin/nvidia-ctk", ctk, 0o755),
        File(
            "/usr/bin/nvidia-container-runtime",
            program("nvidia-container-runtime.sh", VERSION=t.version),
            0o755,
        ),
        File("/etc/nvidia-container-runtime/config.toml", config.encode()),
    ]
    base = package(
        fmt, t.version, "1", "nvidia-container-toolkit-base", "NVIDIA Container Toolkit Base", base_entries
    )
    hook = program("nvidia-container-runtime-hook.sh", VERSION=t.version)
    toolkit = package(
        fmt,
        t.version,
        "1",
        "nvidia-container-toolkit",
        "NVIDIA Container Toolkit",
        [File("/usr/bin/nvidia-container-runtime-hook", hook, 0o755)],
        depends=(exact(base),),
    )
    return [base, toolkit]
