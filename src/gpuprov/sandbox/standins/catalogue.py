"""The catalogue: which releases of NVIDIA's packages the sandbox mirror holds, with their exact versions."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace


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
    # "12.4.127": the CUDA runtime's version (release notes' component table), which NVIDIA's
    # cuda-toolkit-*-config-common packages carry ("cuda-toolkit-12-4-config-common-12.4.127-1").
    cudart_version: str

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

    def carrying(self, cuda_versions: Collection[str]) -> Catalogue:
        """The rows one NVIDIA repository holds when it carries these CUDA toolkits: only those toolkits,
        and only the cuDNN and NCCL builds made for their CUDA (cuDNN 9 per CUDA major, cuDNN 8 and NCCL
        per CUDA minor: "+cuda12.2"). A repository without a CUDA minor has no builds for it. Drivers,
        DCGM and the container toolkit do not depend on the CUDA release and stay."""
        cuda = tuple(c for c in self.cuda if c.version in cuda_versions)
        targets = {c.short for c in cuda} | {c.version.split(".")[0] for c in cuda}
        return replace(
            self,
            cuda=cuda,
            cudnn=tuple(c for c in self.cudnn if c.cuda in targets),
            nccl=tuple(n for n in self.nccl if n.cuda in targets),
        )


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
        # R580 (long-term support to June 2028), the sandbox lock's: 580.126.09 in NVIDIA/gpu-driver-container
        # versions.mk (commit 3172f08, 2026-01-16); its nvidia-smi prints "CUDA Version: 13.0"
        # (tests/recorded/nvidia-smi/summary-2xA100-580.126.09).
        DriverRelease(branch="580", version="580.126.09", cuda="13.0"),
        # R590, the first branch NVIDIA's ubuntu* repositories name without the branch (drivers.py):
        # 590.48.01 in NVIDIA/gpu-driver-container versions.mk (commit feb891d, 2025-12-22); its nvidia-smi
        # prints "CUDA Version: 13.1" in 580's table layout (nvidia-smi outputs published with it).
        DriverRelease(branch="590", version="590.48.01", cuda="13.1"),
    ),
    cuda=(
        CudaRelease(
            "12.2.2",
            nvcc_version="12.2.140",
            nvcc_build="33191640",
            nvcc_built_on="Tue_Aug_15_22:02:13_PDT_2023",
            cudart_version="12.2.140",
        ),
        CudaRelease(
            "12.4.1",
            nvcc_version="12.4.131",
            nvcc_build="34097967",
            nvcc_built_on="Thu_Mar_28_02:18:24_PDT_2024",
            cudart_version="12.4.127",
        ),
        CudaRelease(
            "12.6.3",
            nvcc_version="12.6.85",
            nvcc_build="35059454",
            nvcc_built_on="Tue_Oct_29_23:50:19_PDT_2024",
            cudart_version="12.6.77",
        ),
        CudaRelease(
            "12.8.1",
            nvcc_version="12.8.93",
            nvcc_build="35583870",
            nvcc_built_on="Fri_Feb_21_20:23:50_PST_2025",
            cudart_version="12.8.90",
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
    container_toolkit=(ContainerToolkitRelease(version="1.17.3"), ContainerToolkitRelease(version="1.18.0")),
)
