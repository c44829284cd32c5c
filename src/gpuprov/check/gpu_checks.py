"""Per-host GPU checks: count, driver and CUDA, persistence, Xid, matmul under load (clocks
and PCIe link read then), NVLink, peermem, fabric manager, DKMS."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from typing import Any

from gpuprov.check import matmul_floor, parsers, xid, xid_watermark
from gpuprov.check.host_view import NO_GPU, HostView, did_not_run
from gpuprov.check.results import Result, Status


def smi_q(view: HostView) -> tuple[parsers.SmiQuery | None, str | None]:
    run = view.tool("smi_q")
    why = did_not_run(run, "nvidia-smi")
    if why:
        return None, why
    if run.get("rc") != 0:
        text = (str(run.get("stdout", "")) + str(run.get("stderr", ""))).strip()
        first = next((line.strip() for line in text.splitlines() if line.strip()), "no output")
        return None, f"nvidia-smi -q exited {run.get('rc')}: {first}"
    return parsers.smi_query(str(run.get("stdout", ""))), None


def gpu_query(view: HostView, check: str) -> tuple[parsers.SmiQuery | None, list[Result]]:
    """`nvidia-smi -q` for a per-GPU check, or the result that says why the check cannot be judged."""
    if not view.has_gpus:
        return None, view.not_applicable(check, NO_GPU)
    query, why = smi_q(view)
    if query is None:
        return None, [view.result(check, Status.COULD_NOT_RUN, detail=str(why))]
    return query, []


def gpu_count(view: HostView) -> list[Result]:
    count, source = view.expected_gpus
    if count == 0:
        return view.not_applicable("gpu-count", f"{NO_GPU} ({source} says 0)")
    query, why = smi_q(view)
    if query is None:
        return [
            view.result(
                "gpu-count",
                Status.FAIL if _smi_ran(view) else Status.COULD_NOT_RUN,  # ran: the driver answered wrongly
                expected=str(count),
                unit="GPUs",
                source=source,
                detail=str(why),
                action=_smi_advice(view),
            )
        ]
    found = len(query.gpus) if query.gpus else (query.attached or 0)
    return [
        view.verdict(
            "gpu-count",
            found == count,
            measured=str(found),
            expected=str(count),
            unit="GPUs",
            source=source,
            margin=str(found - count),
            action=_count_advice(found, count, source),
        )
    ]


def _smi_ran(view: HostView) -> bool:
    return view.tool("smi_q").get("rc") is not None


def _smi_advice(view: HostView) -> str:
    """What to do when nvidia-smi -q gave no answer: missing, hung, or failed with a message."""
    run = view.tool("smi_q")
    if run.get("skipped"):
        return "the driver is hung: read dmesg for Xid, then reboot the host (nothing else ends that process)"
    if run.get("timeout"):
        return (
            f"nvidia-smi hung (no answer in {run['timeout']} s; it was killed): a GPU or the driver is "
            "stuck; read dmesg for Xid, then reset the GPU (nvidia-smi -r) or reboot the host"
        )
    if run.get("rc") is None:
        return "install the driver (gpuprov bootstrap)"
    return "read the message; a driver/library mismatch needs a reboot"


def _count_advice(found: int, count: int, source: str) -> str:
    if found > count:
        return (
            f"nvidia-smi lists {found - count} GPU(s) more than expected: correct the expected count "
            f"({source}) or check the host is the one meant"
        )
    return "a GPU is missing from nvidia-smi: read dmesg (Xid 79?), reseat or service it"


def cuda_driver(view: HostView) -> list[Result]:
    """The locked CUDA is not newer than the newest CUDA the loaded driver supports (nvidia-smi's
    `CUDA Version`)."""
    query, otherwise = gpu_query(view, "cuda-driver")
    if query is None:
        return otherwise
    wanted = ".".join(view.lock.get("cuda_version", "").split(".")[:2])
    if query.cuda_version is None:
        return [
            view.result(
                "cuda-driver",
                Status.COULD_NOT_RUN,
                expected=f">= {wanted}",
                detail="nvidia-smi -q shows no CUDA Version for the driver",
            )
        ]
    return [
        view.verdict(
            "cuda-driver",
            _release(query.cuda_version) >= _release(wanted),
            measured=query.cuda_version,
            expected=f">= {wanted}",
            source="the lock's cuda_version; nvidia-smi -q 'CUDA Version' (the newest the driver supports)",
            action="load the locked driver (reboot after gpuprov bootstrap)",
        )
    ]


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def persistence(view: HostView) -> list[Result]:
    query, otherwise = gpu_query(view, "persistence")
    if query is None:
        return otherwise
    off = [gpu["bus_id"] for gpu in query.gpus if gpu.get("Persistence Mode") != "Enabled"]
    return [
        view.verdict(
            "persistence",
            not off,
            measured=f"off on {', '.join(off)}" if off else "Enabled on all",
            expected="Enabled",
            source="nvidia_driver role (nvidia-persistenced)",
            action="start nvidia-persistenced (gpuprov bootstrap)",
        )
    ]


def xid_events(view: HostView) -> list[Result]:
    """Xid events new since the last check (xid_watermark): one that xid.needs_action names fails, another
    warns."""
    if not view.has_gpus:
        return view.not_applicable("xid", NO_GPU)
    log = view.tool("kernel_log")
    if log.get("rc") != 0:
        return [
            view.result(
                "xid",
                Status.COULD_NOT_RUN,
                detail=str(log.get("error") or "the kernel log could not be read"),
                action="allow the user to read the kernel log (sudo dmesg, or kernel.dmesg_restrict=0)",
            )
        ]
    events = parsers.xid_events(str(log.get("stdout", "")))
    mark = view.data.get(xid_watermark.KEY)
    boot_id = str(view.data.get("boot_id") or "")
    new = [e for e in events if xid_watermark.is_new(e, boot_id, mark)]
    earlier = _earlier_xids([e for e in events if e not in new], mark)
    if not new:
        since = f"since the check of {mark['checked_at']}" if events and mark else "since boot"
        return [
            view.result("xid", Status.PASS, measured=f"none {since}", detail=earlier, source=xid.CATALOG_URL)
        ]
    codes = ", ".join(map(str, sorted({e.code for e in new})))
    serious = [(e, m) for e in new if (m := xid.needs_action(e.code, e.text)) is not None]
    if serious:
        first, meaning = serious[0]
        return [
            view.result(
                "xid",
                Status.FAIL,
                measured=f"Xid {codes}",
                expected="no new Xid that needs action",
                source=meaning.source,
                detail="; ".join(
                    filter(None, [f"Xid {first.code} on {first.pci}: {meaning.meaning}", earlier])
                ),
                action=meaning.action,
            )
        ]
    return [
        view.result(
            "xid",
            Status.WARN,
            measured=f"Xid {codes}",
            source=xid.CATALOG_URL,
            detail="; ".join(
                filter(None, ["Xid events that gpuprov's table does not list as failing", earlier])
            ),
            action="look them up in NVIDIA's Xid catalog",
        )
    ]


def _earlier_xids(events: list[parsers.XidEvent], mark: Mapping[str, Any] | None) -> str:
    """The Xids an earlier check judged, named so a reader knows they were seen and not judged again."""
    if not events or not mark:
        return ""
    codes = ", ".join(map(str, sorted({e.code for e in events})))
    return (
        f"Xid {codes} judged by the check of {mark['checked_at']}, not judged again (reset or reboot since?)"
    )


MATMUL_RATIO = 0.75  # warn below this fraction of the host's median TFLOPS
# Reasons that say the clocks were held down by something to fix under load; Idle, Applications Clocks
# Setting and Display Clock Setting are left out as DCGM's throttle alerts leave them out
# (canonical/hardware-observer-operator#307). SW Power Cap is left out too: under the all-GPU GEMM a GPU
# runs at its power limit by design (NVML: the clocks "have been optimized to ensure not to exceed currently
# set power limits"), and Azure's node health check ignores it (azurehpc-health-checks
# azure_gpu_clock_throttling.nhc passes SW_POWER_CAP 0x4; Azure/azurehpc#595). A power limit set too low
# shows in the matmul's floor instead.
HARMLESS_CLOCK_REASONS = ("Idle", "Applications Clocks Setting", "Display Clock Setting", "SW Power Cap")


def _matmul_run(view: HostView) -> tuple[dict[str, float] | None, str | None]:
    run = view.tool("matmul")
    if not run:
        return None, "the env's torch does not see a GPU (torch.cuda.is_available() is False)"
    why = did_not_run(run, "the matmul")
    if why:
        return None, why
    try:
        info = json.loads(str(run.get("stdout", "")).strip().splitlines()[-1])
        return {k: float(v) for k, v in info["tflops"].items()}, None
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        last = (str(run.get("stderr", "")).strip().splitlines() or ["no output"])[-1]
        return None, f"the matmul failed: {last}"


def matmul(view: HostView) -> list[Result]:
    """The env's torch multiplies matrices on every GPU after a thermal soak: a GPU below its model's
    published floor fails (matmul_floor), one far below the host's median warns."""
    if not view.has_gpus:
        return view.not_applicable("matmul", NO_GPU)
    tflops, why = _matmul_run(view)
    if tflops is None:
        return [
            view.result(
                "matmul",
                Status.COULD_NOT_RUN if view.tool("matmul").get("skipped") else Status.FAIL,
                detail=str(why),
                action="read the message; check the driver and the env",
            )
        ]
    median = statistics.median(tflops.values())
    query, _ = smi_q(view)
    published = matmul_floor.for_gpus([g.get("Product Name", "") for g in query.gpus] if query else [])
    return [
        _matmul_result(view, index, value, median, published)
        for index, value in sorted(tflops.items(), key=lambda item: int(item[0]))
    ]


def _matmul_result(
    view: HostView, index: str, value: float, median: float, published: matmul_floor.Published | None
) -> Result:
    low = median > 0 and value < MATMUL_RATIO * median
    relative = f">= {MATMUL_RATIO:g} x the host's median ({median:g})"
    if published is None:
        floor_text, below = "no published floor for this GPU model", False
    else:
        floor_text = (
            f">= {published.floor:g} ({published.model}: {published.tflops:g} x {matmul_floor.MARGIN:g})"
        )
        below = value < published.floor
    status = Status.FAIL if below else Status.WARN if low else Status.PASS
    return view.result(
        "matmul",
        status,
        measured=f"GPU {index}: {value:g}",
        expected=f"{floor_text}; {relative}",
        unit="TFLOPS (fp16, 16384x16384, after a 30 s soak)",
        source=f"{matmul_floor.SOURCE}; gpuprov: GPUs of one host should match each other",
        margin=f"{value / median:.2f} x median" if median > 0 else "",
        action={
            Status.FAIL: "the GPU is below what its model reaches: read the clocks check, the power limit "
            "(nvidia-smi -q -d POWER) and the GPU's temperature",
            Status.WARN: "read the clocks check (throttling?) and the GPU's temperature",
        }.get(status, ""),
    )


def _busy_query(view: HostView) -> tuple[parsers.SmiQuery | None, str | None]:
    """nvidia-smi -q as read while the matmul kept the GPUs busy."""
    run = view.tool("matmul")
    busy = run.get("smi_q_busy") if run else None
    if not isinstance(busy, Mapping):
        return None, "no matmul ran to read the GPUs under load (see the matmul check)"
    why = did_not_run(busy, "nvidia-smi")
    if why or busy.get("rc") != 0:
        return None, why or f"nvidia-smi -q exited {busy.get('rc')} under load"
    return parsers.smi_query(str(busy.get("stdout", ""))), None


def clocks(view: HostView) -> list[Result]:
    """Clocks event (throttle) reasons read while the GPUs ran the matmul: an active one warns."""
    if not view.has_gpus:
        return view.not_applicable("clocks", NO_GPU)
    query, why = _busy_query(view)
    if query is None:
        return [view.result("clocks", Status.COULD_NOT_RUN, detail=str(why))]
    held = []
    for index, gpu in enumerate(query.gpus):
        reasons = [r for r in parsers.active_clock_reasons(gpu) or [] if r not in HARMLESS_CLOCK_REASONS]
        if reasons:
            held.append(f"GPU {index}: {', '.join(reasons)}")
    return [
        view.verdict(
            "clocks",
            not held,
            otherwise=Status.WARN,
            measured="; ".join(held) or "no clocks event reason active under load",
            expected="none active but Idle, Applications Clocks Setting, Display Clock Setting, SW Power Cap",
            source="nvidia-smi -q Clocks Event Reasons (Clocks Throttle Reasons before 535), "
            "read during the matmul",
            action="check cooling and power (HW/SW thermal or power slowdown)",
        )
    ]


def pcie(view: HostView) -> list[Result]:
    """PCIe generation and width read while the GPUs ran the matmul (an idle GPU lowers its link speed)."""
    if not view.has_gpus:
        return view.not_applicable("pcie", NO_GPU)
    query, why = _busy_query(view)
    if query is None:
        return [view.result("pcie", Status.COULD_NOT_RUN, detail=str(why))]
    slow, shown = [], []
    for index, gpu in enumerate(query.gpus):
        link = parsers.pcie_link(gpu)
        if link is None:
            continue
        shown.append(f"GPU {index}: Gen{link.gen_current} x{link.width_current}")
        if link.gen_current < link.gen_max or link.width_current < link.width_max:
            slow.append(
                f"GPU {index}: Gen{link.gen_current} x{link.width_current} "
                f"(max Gen{link.gen_max} x{link.width_max})"
            )
    if not shown:
        return view.not_applicable("pcie", "nvidia-smi shows no PCIe link (N/A)")
    return [
        view.verdict(
            "pcie",
            not slow,
            otherwise=Status.WARN,
            measured="; ".join(slow or shown),
            expected="current generation and width at their max, under load",
            source="nvidia-smi -q PCI/GPU Link Info, read during the matmul",
            action="reseat the GPU or its riser; check the slot's BIOS settings",
        )
    ]


def fabricmanager(view: HostView) -> list[Result]:
    """Fabric manager running where the PCI bus has NVSwitches (NVIDIA bridge devices, class 0x0680)."""
    if not view.has_gpus:
        return view.not_applicable("fabricmanager", NO_GPU)
    switches = int(view.data.get("pci_nvswitches") or 0)
    if switches == 0:
        nvlink5 = bool(view.tool("nvlink5").get("managers"))  # NVLink 5's switches: the nvlink5 check
        return view.not_applicable(
            "fabricmanager",
            "NVLink 5: no NVSwitch on the PCI bus; the nvlink5 check covers fabric manager"
            if nvlink5
            else "no NVSwitch on the PCI bus (vendor 0x10de, class 0x0680)",
        )
    run = view.tool("fabricmanager")
    state = str(run.get("stdout", "")).strip() or "unknown"
    return [
        view.verdict(
            "fabricmanager",
            run.get("rc") == 0 and state == "active",
            measured=f"nvidia-fabricmanager {state}",
            expected="active",
            source=f"{switches} NVSwitch(es) on the PCI bus; NVIDIA Fabric Manager user guide",
            action="systemctl enable --now nvidia-fabricmanager (gpuprov bootstrap installs it)",
        )
    ]


def dkms(view: HostView) -> list[Result]:
    """The driver's module is built and installed for the running kernel (DKMS); precompiled modules have no
    DKMS, and the check does not apply to them."""
    if not view.has_gpus:
        return view.not_applicable("dkms", NO_GPU)
    run = view.tool("dkms")
    if run.get("missing"):
        return view.not_applicable("dkms", "no dkms on the host (a precompiled kernel module)")
    why = did_not_run(run, "dkms status")
    if why or run.get("rc") != 0:
        return [
            view.result("dkms", Status.COULD_NOT_RUN, detail=why or f"dkms status exited {run.get('rc')}")
        ]
    kernel = str(view.data.get("kernel") or "")
    entries = [e for e in parsers.dkms_status(str(run.get("stdout", ""))) if e.module == "nvidia"]
    if not entries:
        return view.not_applicable("dkms", "dkms lists no nvidia module (a precompiled kernel module)")
    wanted = view.lock.get("driver_version", "")
    here = [e for e in entries if e.kernel == kernel and e.state == "installed"]
    return [
        view.verdict(
            "dkms",
            any(e.version == wanted for e in here),
            measured=", ".join(f"{e.version} for {e.kernel}: {e.state}" for e in entries[:4]),
            expected=f"nvidia {wanted} installed for the running kernel {kernel}",
            source="dkms status; the lock's driver_version",
            action="install the running kernel's headers and run dkms autoinstall, or boot the kernel it was "
            "built for",
        )
    ]


def nvlink(view: HostView) -> list[Result]:
    if not view.has_gpus:
        return view.not_applicable("nvlink", NO_GPU)
    run = view.tool("smi_nvlink")
    why = did_not_run(run, "nvidia-smi")
    if why:
        return [view.result("nvlink", Status.COULD_NOT_RUN, detail=why)]
    gpus = parsers.nvlink_status(str(run.get("stdout", "")))
    if not any(gpu.links for gpu in gpus):
        return view.not_applicable("nvlink", "the GPUs have no NVLink")
    inactive = [f"GPU {g.index} link {link}" for g in gpus for link in g.inactive]
    total = sum(len(g.links) for g in gpus)
    return [
        view.verdict(
            "nvlink",
            not inactive,
            measured=f"{total - len(inactive)} of {total} active",
            expected="all links active",
            source="nvidia-smi nvlink --status",
            detail=", ".join(inactive[:6]),
            action="reseat the NVLink bridge or service the GPU",
        )
    ]
