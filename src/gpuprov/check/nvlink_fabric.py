"""NVLink 5 and IMEX: what fabric manager needs where the NVSwitches are not on the PCI bus (HGX B200/B300),
and the IMEX service of multi-node NVLink.

An NVLink 5 system is one with an InfiniBand device whose VPD holds SW_MNG (NVIDIA's driver container's test,
read by hostprobe). There fabric manager must run, and its unit's precheck needs ib_umad loaded (fabric
manager reaches the switches with InfiniBand MADs through /dev/infiniband/umad*)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuprov.check.host_view import NO_GPU, HostView, did_not_run
from gpuprov.check.results import Result, Status

_IMEX_PACKAGE = re.compile(r"nvidia-imex(-\d{3})?")  # nvidia-imex from R580, nvidia-imex-<branch> before
SOURCE = "NVIDIA/gpu-driver-container nvidia-driver (_assert_nvlink5_system, _ensure_nvlink5_prerequisites)"


def nvlink5(view: HostView) -> list[Result]:
    """Fabric manager active and ib_umad loaded where an InfiniBand device manages NVLink 5 switches."""
    if not view.has_gpus:
        return view.not_applicable("nvlink5", NO_GPU)
    found = view.tool("nvlink5")
    managers = [str(m) for m in found.get("managers") or []]
    unreadable = [str(u) for u in found.get("unreadable") or []]
    if not managers and unreadable:
        return [
            view.result(
                "nvlink5",
                Status.COULD_NOT_RUN,
                detail=f"the VPD of {', '.join(unreadable)} is readable by root only, and sudo -n failed",
                action="give the checking user passwordless sudo for grep, or run gpuprov check as root",
            )
        ]
    if not managers:
        return view.not_applicable("nvlink5", "no InfiniBand device's VPD names SW_MNG (not NVLink 5)")
    state = _state(view.tool("fabricmanager"))
    umad = "ib_umad" in (view.data.get("modules") or [])
    return [
        view.verdict(
            "nvlink5",
            state == "active" and umad,
            measured=f"nvidia-fabricmanager {state}, ib_umad {'loaded' if umad else 'not loaded'}",
            expected="nvidia-fabricmanager active, ib_umad loaded",
            source=f"NVSwitch managers {', '.join(managers)} (VPD SW_MNG); {SOURCE}",
            action="run gpuprov bootstrap (it installs NVLSM, loads ib_umad and starts fabric manager)",
        )
    ]


def imex(view: HostView) -> list[Result]:
    """nvidia-imex active where it is installed (multi-node NVLink: the nvidia_driver role's IMEX setting)."""
    installed: Mapping[str, str] = view.tool("packages").get("installed") or {}
    packages = sorted(name for name in installed if _IMEX_PACKAGE.fullmatch(name))
    if not packages:
        return view.not_applicable("imex", "nvidia-imex is not installed (multi-node NVLink only)")
    run = view.tool("imex")
    why = did_not_run(run, "systemctl")
    if why:
        return [view.result("imex", Status.COULD_NOT_RUN, detail=why)]
    state = _state(run)
    return [
        view.verdict(
            "imex",
            state == "active",
            measured=f"nvidia-imex {state}",
            expected="active",
            source=f"{packages[0]} installed; NVIDIA IMEX Service for NVLink Networks user's guide",
            action="check that /etc/nvidia-imex/nodes_config.cfg lists the same addresses on every node of "
            "the domain, read the service's journal; systemctl enable --now nvidia-imex",
        )
    ]


def _state(run: Mapping[str, object]) -> str:
    return str(run.get("stdout", "")).strip() or "unknown"
