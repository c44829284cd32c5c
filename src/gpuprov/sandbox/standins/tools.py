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


# The CDI refresh units nvidia-container-toolkit-base installs into /etc/systemd/system from toolkit 1.18.0
# on (packaging/debian/nvidia-container-toolkit-base.install; deployments/systemd/ of
# github.com/NVIDIA/nvidia-container-toolkit at v1.18.0): the directives as published, in their order.
CDI_REFRESH_SERVICE = (
    "[Unit]\n"
    "Description=Refresh NVIDIA CDI specification file\n"
    "ConditionPathExists=|/usr/bin/nvidia-smi\n"
    "ConditionPathExists=|/usr/sbin/nvidia-smi\n"
    "ConditionPathExists=/usr/bin/nvidia-ctk\n\n"
    "[Service]\n"
    "Type=oneshot\n"
    "Environment=NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml\n"
    "EnvironmentFile=-/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env\n"
    "ExecCondition=/usr/bin/grep -qE '/nvidia.ko' /lib/modules/%v/modules.dep\n"
    "ExecStart=/usr/bin/nvidia-ctk cdi generate\n"
    "CapabilityBoundingSet=CAP_SYS_MODULE CAP_SYS_ADMIN CAP_MKNOD\n\n"
    "[Install]\n"
    "WantedBy=multi-user.target\n"
)
CDI_REFRESH_PATH = (
    "[Unit]\n"
    "Description=Trigger CDI refresh on NVIDIA driver or toolkit install / upgrade events\n\n"
    "[Path]\n"
    "PathChanged=/lib/modules/%v/modules.dep\n"
    "PathChanged=/lib/modules/%v/modules.dep.bin\n"
    "PathChanged=/usr/bin/nvidia-ctk\n\n"
    "[Install]\n"
    "WantedBy=multi-user.target\n"
)
STANDIN_NOTE = "# gpuprov sandbox stand-in: the directives of NVIDIA's unit of the same name, unchanged\n"


def container_toolkit(t: ContainerToolkitRelease, fmt: Format) -> list[Package]:
    """NVIDIA Container Toolkit's four packages as NVIDIA's libnvidia-container repository has them:
    nvidia-container-toolkit depends on nvidia-container-toolkit-base and libnvidia-container-tools of its
    own version, which depends on libnvidia-container1 (exact pins here; the real one is shlibs' >=)."""
    config = (
        "# gpuprov sandbox stand-in for /etc/nvidia-container-runtime/config.toml\n"
        '[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig"\n\n'
        '[nvidia-container-runtime]\nmode = "auto"\nruntimes = ["runc"]\n'
    )
    base_entries: list[Entry] = [
        File("/usr/bin/nvidia-ctk", program("nvidia-ctk.sh", VERSION=t.version), 0o755),
        File(
            "/usr/bin/nvidia-container-runtime",
            program("nvidia-container-runtime.sh", VERSION=t.version),
            0o755,
        ),
        File("/etc/nvidia-container-runtime/config.toml", config.encode()),
    ]
    if _at_least(t.version, (1, 18)):
        base_entries += [
            File(
                "/etc/systemd/system/nvidia-cdi-refresh.service",
                (STANDIN_NOTE + CDI_REFRESH_SERVICE).encode(),
            ),
            File("/etc/systemd/system/nvidia-cdi-refresh.path", (STANDIN_NOTE + CDI_REFRESH_PATH).encode()),
            File("/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env", b""),
        ]
    base = package(
        fmt, t.version, "1", "nvidia-container-toolkit-base", "NVIDIA Container Toolkit Base", base_entries
    )
    library = package(
        fmt,
        t.version,
        "1",
        "libnvidia-container1",
        "NVIDIA container runtime library",
        [File(f"{fmt.libdir}/libnvidia-container.so.{t.version}", b"gpuprov sandbox stand-in\n")],
    )
    cli = package(
        fmt,
        t.version,
        "1",
        "libnvidia-container-tools",
        "NVIDIA container runtime library (command-line tools)",
        [File("/usr/bin/nvidia-container-cli", program("nvidia-container-cli.sh", VERSION=t.version), 0o755)],
        depends=(exact(library),),
    )
    hook = program("nvidia-container-runtime-hook.sh", VERSION=t.version)
    toolkit = package(
        fmt,
        t.version,
        "1",
        "nvidia-container-toolkit",
        "NVIDIA Container Toolkit",
        [File("/usr/bin/nvidia-container-runtime-hook", hook, 0o755)],
        depends=(exact(base), exact(cli)),
    )
    return [library, cli, base, toolkit]


def _at_least(version: str, minimum: tuple[int, ...]) -> bool:
    return tuple(int(part) for part in version.split(".")[: len(minimum)]) >= minimum
