"""The per-host checks: what one host's gathered data says, against the lock and the inventory.

Each check is a function of a HostView that returns its results; CHECKS names them in table order (the
names --only and --skip take). A check that does not apply to the host (GPU checks where no GPU is
expected, InfiniBand where there is none) is not-applicable; one that should run and cannot (a tool missing,
an unreadable log) is could-not-run.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuprov.check import (
    gpu_checks,
    gpu_memory,
    gpudirect,
    network_checks,
    nvlink_fabric,
    recovery_action,
    version_checks,
)
from gpuprov.check.host_view import HostView
from gpuprov.check.results import Result

Check = Callable[[HostView], list[Result]]

CHECKS: dict[str, Check] = {
    "driver-package": version_checks.driver_package,
    "driver-module": version_checks.driver_module,
    "cuda": version_checks.cuda,
    "cudnn": version_checks.cudnn,
    "nccl": version_checks.nccl,
    "holds": version_checks.holds,
    "torch": version_checks.python_env,  # also gives "python"
    "gpu-count": gpu_checks.gpu_count,
    "cuda-driver": gpu_checks.cuda_driver,
    "persistence": gpu_checks.persistence,
    "xid": gpu_checks.xid_events,
    "gpu-memory": gpu_memory.gpu_memory,
    "recovery-action": recovery_action.recovery_action,
    "matmul": gpu_checks.matmul,
    "clocks": gpu_checks.clocks,
    "pcie": gpu_checks.pcie,
    "nvlink": gpu_checks.nvlink,
    "peermem": gpudirect.peermem,
    "fabricmanager": gpu_checks.fabricmanager,
    "nvlink5": nvlink_fabric.nvlink5,
    "imex": nvlink_fabric.imex,
    "dkms": gpu_checks.dkms,
    "sysctl": network_checks.sysctl,
    "nccl-conf": network_checks.nccl_conf,
    "nccl-interface": network_checks.nccl_interface,
    "infiniband": network_checks.infiniband,
}
