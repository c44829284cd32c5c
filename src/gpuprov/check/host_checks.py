"""The per-host checks: what one host's gathered data says, against the lock and the inventory.

Each check is a function of a HostView that returns its results; CHECKS names them in table order (the
names --only and --skip take). A check that does not apply to the host (GPU checks where no GPU is
expected, InfiniBand where there is none) is not-applicable; one that should run and cannot (a tool missing,
an unreadable log) is could-not-run.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuprov.check import expected, parsers, xid
from gpuprov.check.results import Result, Status

LOCK = expected.LOCK_SOURCE
NO_GPU = "no GPU expected on this host"


@dataclass
class HostView:
    name: str
    vars: Mapping[str, Any]  # the host's inventory variables, -e values on top
    data: Mapping[str, Any]  # what hostprobe collected

    @property
    def lock(self) -> Mapping[str, str]:
        stack = self.vars.get("gpu_stack")
        return stack if isinstance(stack, Mapping) else {}

    @property
    def expected_gpus(self) -> tuple[int, str]:
        """How many GPUs the host should have, and where that number comes from."""
        count = self.vars.get("gpuprov_gpu_count")
        if count is not None and str(count).strip().isdigit():
            return int(str(count)), "inventory (gpuprov_gpu_count)"
        return int(self.data.get("pci_nvidia_gpus") or 0), "the PCI bus (NVIDIA display/3D controllers)"

    @property
    def has_gpus(self) -> bool:
        return self.expected_gpus[0] > 0

    def tool(self, key: str) -> Mapping[str, Any]:
        value = self.data.get(key)
        return value if isinstance(value, Mapping) else {}

    def result(self, check: str, status: Status, **fields: str) -> Result:
        return Result(check=check, host=self.name, status=status, **fields)

    def not_applicable(self, check: str, why: str) -> list[Result]:
        return [self.result(check, Status.NOT_APPLICABLE, detail=why)]


def _did_not_run(run: Mapping[str, Any], what: str) -> str | None:
    """Why a tool gave no answer (missing, timed out), or None when it ran."""
    if run.get("missing"):
        return f"{what} is not installed on the host"
    if run.get("timeout"):
        return f"{what} did not finish within {run['timeout']} s"
    if run.get("rc") is None:
        return f"{what} did not run"
    return None


def upstream(version: str) -> str:
    """A package version without its epoch and its packaging release: 3:550.127.08-1.el9 -> 550.127.08."""
    return version.split(":", 1)[-1].split("-", 1)[0]


# ----- versions -------------------------------------------------------------------------------------------

_DRIVER_VERSION = re.compile(r"\d{3}\.\d+(\.\d+)?")
# Driver packages: Debian's and NVIDIA's names (nvidia-*, libnvidia-*, libcuda1), the rpm kmod ones.
DRIVER_PREFIXES = ("nvidia-", "libnvidia-", "libcuda1", "kmod-nvidia")
CUDNN_PACKAGES = r"(lib)?cudnn\d+(-dev|-devel)?(-cuda-\d+)?"
NCCL_PACKAGES = r"libnccl(2|-dev|-devel)?"


def driver_package(view: HostView) -> list[Result]:
    wanted = view.lock.get("driver_version", "")
    installed: Mapping[str, str] = view.tool("packages").get("installed") or {}
    drivers = {
        name: upstream(version)
        for name, version in installed.items()
        if name.startswith(DRIVER_PREFIXES) and _DRIVER_VERSION.fullmatch(upstream(version))
    }
    if not drivers:
        return [
            view.result(
                "driver-package",
                Status.FAIL,
                measured="not installed",
                expected=wanted,
                source=LOCK,
                detail="no NVIDIA driver package is installed",
                action="run gpuprov bootstrap",
            )
        ]
    wrong = sorted(f"{name} {version}" for name, version in drivers.items() if version != wanted)
    if wrong:
        return [
            view.result(
                "driver-package",
                Status.FAIL,
                measured=", ".join(wrong[:4]),
                expected=wanted,
                source=LOCK,
                detail=f"{len(wrong)} driver package(s) at another version",
                action="run gpuprov bootstrap to install the locked driver (then reboot)",
            )
        ]
    return [view.result("driver-package", Status.PASS, measured=wanted, expected=wanted, source=LOCK)]


def driver_module(view: HostView) -> list[Result]:
    if not view.has_gpus:
        return view.not_applicable("driver-module", NO_GPU)
    wanted = f"{view.lock.get('driver_version', '')} {view.lock.get('driver_flavor', '')}"
    text = view.data.get("proc_driver_version")
    if not text:
        return [
            view.result(
                "driver-module",
                Status.FAIL,
                measured="no module loaded",
                expected=wanted,
                source=LOCK,
                detail="/proc/driver/nvidia/version does not exist: the nvidia kernel module is not loaded",
                action="reboot the host, or load the module (modprobe nvidia) and read dmesg",
            )
        ]
    module = parsers.proc_driver_version(str(text))
    if module is None:
        return [
            view.result(
                "driver-module",
                Status.COULD_NOT_RUN,
                expected=wanted,
                detail="/proc/driver/nvidia/version has no NVRM version line gpuprov can read",
                action="read the file on the host and report it as a gpuprov issue",
            )
        ]
    measured = f"{module.version} {module.flavor}"
    ok = measured == wanted
    return [
        view.result(
            "driver-module",
            Status.PASS if ok else Status.FAIL,
            measured=measured,
            expected=wanted,
            source=LOCK,
            action="" if ok else "reboot the host so the installed (locked) driver's module is loaded",
        )
    ]


def cuda(view: HostView) -> list[Result]:
    wanted = view.lock.get("cuda_version", "")
    text = view.data.get("cuda_version_json")
    if not text:
        return [
            view.result(
                "cuda",
                Status.FAIL,
                measured="not installed",
                expected=wanted,
                source=LOCK,
                detail="no version.json in the CUDA home (cuda_home_link)",
                action="run gpuprov bootstrap",
            )
        ]
    try:
        found = str(json.loads(str(text))["cuda"]["version"])
    except (ValueError, KeyError, TypeError):
        return [
            view.result(
                "cuda",
                Status.COULD_NOT_RUN,
                expected=wanted,
                detail="the toolkit's version.json is not readable",
                action="check the CUDA toolkit's installation (version.json)",
            )
        ]
    ok = found == wanted
    return [
        view.result(
            "cuda",
            Status.PASS if ok else Status.FAIL,
            measured=found,
            expected=wanted,
            source=LOCK,
            action="" if ok else "run gpuprov bootstrap to install the locked CUDA toolkit",
        )
    ]


def _package_check(view: HostView, check: str, pattern: str, lock_field: str) -> list[Result]:
    wanted = view.lock.get(lock_field, "")
    installed: Mapping[str, str] = view.tool("packages").get("installed") or {}
    found = {name: upstream(v) for name, v in installed.items() if re.fullmatch(pattern, name)}
    if not found:
        return [
            view.result(
                check,
                Status.FAIL,
                measured="not installed",
                expected=wanted,
                source=LOCK,
                action="run gpuprov bootstrap",
            )
        ]
    wrong = sorted(f"{n} {v}" for n, v in found.items() if v != wanted)
    return [
        view.result(
            check,
            Status.FAIL if wrong else Status.PASS,
            measured=", ".join(wrong) if wrong else wanted,
            expected=wanted,
            source=LOCK,
            action="run gpuprov bootstrap" if wrong else "",
        )
    ]


def cudnn(view: HostView) -> list[Result]:
    return _package_check(view, "cudnn", CUDNN_PACKAGES, "cudnn_version")


def nccl(view: HostView) -> list[Result]:
    return _package_check(view, "nccl", NCCL_PACKAGES, "nccl_version")


_HOLD_VARIABLES = {
    "driver": ("nvidia_driver", "nvidia_driver_hold"),
    "cuda": ("cuda", "cuda_hold"),
    "cudnn": ("cudnn", "cudnn_hold"),
    "nccl": ("nccl", "nccl_hold"),
}


def _stack_packages(view: HostView) -> dict[str, list[str]]:
    installed: Mapping[str, str] = view.tool("packages").get("installed") or {}
    lock = view.lock
    return {
        "driver": [
            n
            for n, v in installed.items()
            if n.startswith(DRIVER_PREFIXES) and upstream(v) == lock.get("driver_version")
        ],
        "cuda": [n for n in installed if re.fullmatch(r"cuda-toolkit-\d+-\d+", n)],
        "cudnn": [n for n in installed if re.fullmatch(CUDNN_PACKAGES, n)],
        "nccl": [n for n in installed if re.fullmatch(NCCL_PACKAGES, n)],
    }


def holds(view: HostView) -> list[Result]:
    packages = view.tool("packages")
    held = packages.get("held")
    if held is None:
        tool = "apt-mark showhold" if packages.get("manager") == "apt" else "dnf versionlock list"
        return [
            view.result(
                "holds",
                Status.COULD_NOT_RUN,
                detail=f"{tool} gave no answer",
                action="install dnf's versionlock plugin (python3-dnf-plugin-versionlock)"
                if packages.get("manager") == "dnf"
                else "check the package manager on the host",
            )
        ]
    wanted = [
        name
        for part, names in _stack_packages(view).items()
        if expected.truthy(expected.variable(view.vars, *_HOLD_VARIABLES[part]))
        for name in names
    ]
    loose = sorted(set(wanted) - set(held))
    return [
        view.result(
            "holds",
            Status.FAIL if loose else Status.PASS,
            measured=f"{len(wanted) - len(loose)} of {len(wanted)} held",
            expected="every stack package held",
            source="the roles' *_hold variables (default true)",
            detail=("not held: " + ", ".join(loose[:6])) if loose else "",
            action="run gpuprov bootstrap (it holds them again)" if loose else "",
        )
    ]


_LOCAL_TAG = re.compile(r"\+(.+)$")


def python_env(view: HostView) -> list[Result]:
    run = view.tool("env")
    python = str(view.data.get("python_path") or "")
    why = _did_not_run(run, f"the env's python ({python})")
    if why:
        return [view.result("torch", Status.FAIL, detail=why, action="run gpuprov bootstrap (python_env)")]
    try:
        info = json.loads(str(run.get("stdout", "")).strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (str(run.get("stderr", "")).strip().splitlines() or ["no output"])[-1]
        return [view.result("torch", Status.FAIL, detail=f"{python}: {last}", action="run gpuprov bootstrap")]
    results = []
    wanted_python = view.vars.get("python_env_python_version")
    found_python = str(info.get("python", ""))
    if wanted_python:
        ok = found_python == str(wanted_python) or found_python.startswith(f"{wanted_python}.")
        results.append(
            view.result(
                "python",
                Status.PASS if ok else Status.FAIL,
                measured=found_python,
                expected=str(wanted_python),
                source="inventory (python_env_python_version)",
                action="" if ok else "run gpuprov bootstrap",
            )
        )
    else:
        results.append(
            view.result(
                "python", Status.PASS, measured=found_python, detail="not locked: only compared across hosts"
            )
        )
    if "error" in info:
        results.append(
            view.result(
                "torch",
                Status.FAIL,
                detail=f"import torch failed: {info['error']}",
                action="run gpuprov bootstrap (python_env rebuilds the env)",
            )
        )
        return results
    torch = str(info.get("torch", ""))
    tag_match = _LOCAL_TAG.search(torch)
    base = torch.split("+", 1)[0]
    wanted = f"{view.lock.get('pytorch_version', '')}+{view.lock.get('pytorch_cuda_tag', '')}"
    tag = view.lock.get("pytorch_cuda_tag", "")
    ok = base == view.lock.get("pytorch_version") and (tag_match is None or tag_match.group(1) == tag)
    cuda = info.get("torch_cuda")
    if ok and tag != "cpu" and cuda:  # the CUDA torch was built for: cu124 -> 12.4
        ok = tag == "cu" + str(cuda).replace(".", "")
    measured = torch + (f" (CUDA {cuda})" if cuda else "")
    results.append(
        view.result(
            "torch",
            Status.PASS if ok else Status.FAIL,
            measured=measured,
            expected=wanted,
            source=LOCK,
            action="" if ok else "run gpuprov bootstrap (python_env installs the locked PyTorch)",
        )
    )
    return results


# ----- GPUs -----------------------------------------------------------------------------------------------


def _smi(view: HostView) -> tuple[parsers.SmiQuery | None, str | None]:
    run = view.tool("smi_q")
    why = _did_not_run(run, "nvidia-smi")
    if why:
        return None, why
    if run.get("rc") != 0:
        text = (str(run.get("stdout", "")) + str(run.get("stderr", ""))).strip()
        first = next((line.strip() for line in text.splitlines() if line.strip()), "no output")
        return None, f"nvidia-smi -q exited {run.get('rc')}: {first}"
    return parsers.smi_query(str(run.get("stdout", ""))), None


def gpu_count(view: HostView) -> list[Result]:
    count, source = view.expected_gpus
    if count == 0:
        return view.not_applicable("gpu-count", f"{NO_GPU} ({source} says 0)")
    query, why = _smi(view)
    if query is None:
        status = Status.COULD_NOT_RUN if "not installed" in str(why) else Status.FAIL
        return [
            view.result(
                "gpu-count",
                status,
                expected=str(count),
                unit="GPUs",
                source=source,
                detail=str(why),
                action="install the driver (gpuprov bootstrap)"
                if status is Status.COULD_NOT_RUN
                else "read the message; a driver/library mismatch needs a reboot",
            )
        ]
    found = len(query.gpus) if query.gpus else (query.attached or 0)
    ok = found == count
    return [
        view.result(
            "gpu-count",
            Status.PASS if ok else Status.FAIL,
            measured=str(found),
            expected=str(count),
            unit="GPUs",
            source=source,
            margin=str(found - count),
            action=""
            if ok
            else "a GPU is missing from nvidia-smi: read dmesg (Xid 79?), reseat or service it",
        )
    ]


def cuda_driver(view: HostView) -> list[Result]:
    """The locked CUDA is not newer than the newest CUDA the loaded driver supports (nvidia-smi's
    `CUDA Version`)."""
    if not view.has_gpus:
        return view.not_applicable("cuda-driver", NO_GPU)
    query, why = _smi(view)
    if query is None:
        return [view.result("cuda-driver", Status.COULD_NOT_RUN, detail=str(why))]
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
    ok = _release(query.cuda_version) >= _release(wanted)
    return [
        view.result(
            "cuda-driver",
            Status.PASS if ok else Status.FAIL,
            measured=query.cuda_version,
            expected=f">= {wanted}",
            source="the lock's cuda_version; nvidia-smi -q 'CUDA Version' (the newest the driver supports)",
            action="" if ok else "load the locked driver (reboot after gpuprov bootstrap)",
        )
    ]


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def persistence(view: HostView) -> list[Result]:
    if not view.has_gpus:
        return view.not_applicable("persistence", NO_GPU)
    query, why = _smi(view)
    if query is None:
        return [view.result("persistence", Status.COULD_NOT_RUN, detail=str(why))]
    off = [gpu["bus_id"] for gpu in query.gpus if gpu.get("Persistence Mode") != "Enabled"]
    return [
        view.result(
            "persistence",
            Status.FAIL if off else Status.PASS,
            measured=f"off on {', '.join(off)}" if off else "Enabled on all",
            expected="Enabled",
            source="nvidia_driver role (nvidia-persistenced)",
            action="start nvidia-persistenced (gpuprov bootstrap)" if off else "",
        )
    ]


def xid_events(view: HostView) -> list[Result]:
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
    if not events:
        return [view.result("xid", Status.PASS, measured="none since boot", source=xid.CATALOG_URL)]
    serious = [e for e in events if e.code in xid.NEEDS_ACTION]
    codes = sorted({e.code for e in events})
    if serious:
        first = serious[0]
        meaning = xid.NEEDS_ACTION[first.code]
        return [
            view.result(
                "xid",
                Status.FAIL,
                measured=f"Xid {', '.join(map(str, codes))}",
                expected="no Xid that needs action",
                source=meaning.source,
                detail=f"Xid {first.code} on {first.pci}: {meaning.meaning}",
                action=meaning.action,
            )
        ]
    return [
        view.result(
            "xid",
            Status.WARN,
            measured=f"Xid {', '.join(map(str, codes))}",
            source=xid.CATALOG_URL,
            detail="Xid events that gpuprov's table does not list as needing action",
            action="look them up in NVIDIA's Xid catalog",
        )
    ]


def gpu_memory(view: HostView) -> list[Result]:
    """Row remapping and page retirement pending or failed, and uncorrectable ECC errors, per GPU.

    Uncorrectable errors since the driver loaded (volatile) fail; ones only in the GPU's lifetime count
    (aggregate) warn: they are history, which a remap or retirement may have dealt with."""
    if not view.has_gpus:
        return view.not_applicable("gpu-memory", NO_GPU)
    query, why = _smi(view)
    if query is None:
        return [view.result("gpu-memory", Status.COULD_NOT_RUN, detail=str(why))]
    failing, history = [], []
    for index, gpu in enumerate(query.gpus):
        health = parsers.memory_health(gpu)
        now = [
            text
            for flag, text in (
                (health.remap_pending, "row remap pending"),
                (health.remap_failed, "row remapping failed"),
                (health.retirement_pending, "page retirement pending"),
                (
                    health.uncorrectable_volatile > 0,
                    f"{health.uncorrectable_volatile} uncorrectable ECC (volatile)",
                ),
            )
            if flag
        ]
        where = f"GPU {index} ({gpu['bus_id']})"
        if now:
            failing.append(f"{where}: {', '.join(now)}")
        elif health.uncorrectable_aggregate > 0:
            history.append(f"{where}: {health.uncorrectable_aggregate} uncorrectable ECC (aggregate)")
    status = Status.FAIL if failing else Status.WARN if history else Status.PASS
    return [
        view.result(
            "gpu-memory",
            status,
            measured="; ".join(failing + history) or f"{len(query.gpus)} GPU(s) clean",
            expected="no pending or failed row remap, no pending page retirement, no uncorrectable ECC",
            source=MEMORY_SOURCE,
            action={
                Status.FAIL: "drain the GPU and reset it (nvidia-smi -r) or reboot to apply the remap; "
                "a failed remap or repeated uncorrectable errors: have the GPU serviced",
                Status.WARN: "watch the GPU: uncorrectable errors in its past",
            }.get(status, ""),
        )
    ]


MEMORY_SOURCE = (
    "nvidia-smi -q Remapped Rows, Retired Pages, ECC Errors; NVIDIA's GPU memory error management guide "
    "(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/)"
)
MATMUL_RATIO = 0.75  # warn below this fraction of the host's median TFLOPS
# Reasons that say the clocks were held down by something to fix under load; Idle, Applications Clocks
# Setting and Display Clock Setting are left out as DCGM's throttle alerts leave them out
# (canonical/hardware-observer-operator#307).
HARMLESS_CLOCK_REASONS = ("Idle", "Applications Clocks Setting", "Display Clock Setting")


def _matmul_run(view: HostView) -> tuple[dict[str, float] | None, str | None]:
    run = view.tool("matmul")
    if not run:
        return None, "the env's torch does not see a GPU (torch.cuda.is_available() is False)"
    why = _did_not_run(run, "the matmul")
    if why:
        return None, why
    try:
        info = json.loads(str(run.get("stdout", "")).strip().splitlines()[-1])
        return {k: float(v) for k, v in info["tflops"].items()}, None
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        last = (str(run.get("stderr", "")).strip().splitlines() or ["no output"])[-1]
        return None, f"the matmul failed: {last}"


def matmul(view: HostView) -> list[Result]:
    """The env's torch multiplies matrices on every GPU; a GPU far below the host's median warns."""
    if not view.has_gpus:
        return view.not_applicable("matmul", NO_GPU)
    tflops, why = _matmul_run(view)
    if tflops is None:
        return [
            view.result(
                "matmul",
                Status.FAIL,
                detail=str(why),
                action="read the message; check the driver and the env",
            )
        ]
    median = statistics.median(tflops.values())
    results = []
    for index, value in sorted(tflops.items(), key=lambda item: int(item[0])):
        slow = median > 0 and value < MATMUL_RATIO * median
        results.append(
            view.result(
                "matmul",
                Status.WARN if slow else Status.PASS,
                measured=f"GPU {index}: {value:g}",
                expected=f">= {MATMUL_RATIO:g} x the host's median ({median:g})",
                unit="TFLOPS (fp16, 16384x16384)",
                source="gpuprov: GPUs of one host should match each other",
                margin=f"{value / median:.2f} x median" if median > 0 else "",
                action="read the clocks check (throttling?) and the GPU's temperature" if slow else "",
            )
        )
    return results


def _busy_query(view: HostView) -> tuple[parsers.SmiQuery | None, str | None]:
    """nvidia-smi -q as read while the matmul kept the GPUs busy."""
    run = view.tool("matmul")
    busy = run.get("smi_q_busy") if run else None
    if not isinstance(busy, Mapping):
        return None, "no matmul ran to read the GPUs under load (see the matmul check)"
    why = _did_not_run(busy, "nvidia-smi")
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
        view.result(
            "clocks",
            Status.WARN if held else Status.PASS,
            measured="; ".join(held) or "no clocks event reason active under load",
            expected="none active but Idle, Applications Clocks Setting, Display Clock Setting",
            source="nvidia-smi -q Clocks Event Reasons (Clocks Throttle Reasons before 535), "
            "read during the matmul",
            action="check cooling and power (HW/SW thermal or power slowdown)" if held else "",
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
        view.result(
            "pcie",
            Status.WARN if slow else Status.PASS,
            measured="; ".join(slow or shown),
            expected="current generation and width at their max, under load",
            source="nvidia-smi -q PCI/GPU Link Info, read during the matmul",
            action="reseat the GPU or its riser; check the slot's BIOS settings" if slow else "",
        )
    ]


def peermem(view: HostView) -> list[Result]:
    """GPUDirect RDMA needs nvidia_peermem (the driver's; nv_peer_mem was Mellanox's) where there is RDMA."""
    if not view.has_gpus:
        return view.not_applicable("peermem", NO_GPU)
    if not view.data.get("infiniband"):
        return view.not_applicable("peermem", "no RDMA device (/sys/class/infiniband is empty)")
    modules = set(view.data.get("modules") or [])
    loaded = sorted(modules & {"nvidia_peermem", "nv_peer_mem"})
    return [
        view.result(
            "peermem",
            Status.PASS if loaded else Status.FAIL,
            measured=", ".join(loaded) or "not loaded",
            expected="nvidia_peermem loaded",
            source="NVIDIA GPUDirect RDMA docs (https://docs.nvidia.com/cuda/gpudirect-rdma/)",
            action="" if loaded else "modprobe nvidia_peermem (and add it to /etc/modules-load.d)",
        )
    ]


def fabricmanager(view: HostView) -> list[Result]:
    """Fabric manager running where the PCI bus has NVSwitches (NVIDIA bridge devices, class 0x0680)."""
    if not view.has_gpus:
        return view.not_applicable("fabricmanager", NO_GPU)
    switches = int(view.data.get("pci_nvswitches") or 0)
    if switches == 0:
        return view.not_applicable(
            "fabricmanager", "no NVSwitch on the PCI bus (vendor 0x10de, class 0x0680)"
        )
    run = view.tool("fabricmanager")
    state = str(run.get("stdout", "")).strip() or "unknown"
    ok = run.get("rc") == 0 and state == "active"
    return [
        view.result(
            "fabricmanager",
            Status.PASS if ok else Status.FAIL,
            measured=f"nvidia-fabricmanager {state}",
            expected="active",
            source=f"{switches} NVSwitch(es) on the PCI bus; NVIDIA Fabric Manager user guide",
            action=""
            if ok
            else "systemctl enable --now nvidia-fabricmanager (gpuprov bootstrap installs it)",
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
    why = _did_not_run(run, "dkms status")
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
    ok = any(e.version == wanted for e in here)
    return [
        view.result(
            "dkms",
            Status.PASS if ok else Status.FAIL,
            measured=", ".join(f"{e.version} for {e.kernel}: {e.state}" for e in entries[:4]),
            expected=f"nvidia {wanted} installed for the running kernel {kernel}",
            source="dkms status; the lock's driver_version",
            action=""
            if ok
            else "install the running kernel's headers and run dkms autoinstall, or boot the kernel it was "
            "built for",
        )
    ]


def nvlink(view: HostView) -> list[Result]:
    if not view.has_gpus:
        return view.not_applicable("nvlink", NO_GPU)
    run = view.tool("smi_nvlink")
    why = _did_not_run(run, "nvidia-smi")
    if why:
        return [view.result("nvlink", Status.COULD_NOT_RUN, detail=why)]
    gpus = parsers.nvlink_status(str(run.get("stdout", "")))
    if not any(gpu.links for gpu in gpus):
        return view.not_applicable("nvlink", "the GPUs have no NVLink")
    inactive = [f"GPU {g.index} link {link}" for g in gpus for link in g.inactive]
    total = sum(len(g.links) for g in gpus)
    return [
        view.result(
            "nvlink",
            Status.FAIL if inactive else Status.PASS,
            measured=f"{total - len(inactive)} of {total} active",
            expected="all links active",
            source="nvidia-smi nvlink --status",
            detail=", ".join(inactive[:6]),
            action="reseat the NVLink bridge or service the GPU" if inactive else "",
        )
    ]


# ----- network ----------------------------------------------------------------------------------------------


def sysctl(view: HostView) -> list[Result]:
    wanted = expected.sysctls(view.vars)
    found: Mapping[str, str | None] = view.data.get("sysctl") or {}
    unsettable = set(view.data.get("sysctl_readonly") or [])
    tolerated = expected.truthy(
        expected.variable(view.vars, "network_tuning", "network_tuning_tolerate_unsettable")
    )
    wrong: list[str] = []
    allowed: list[str] = []
    for key, value in wanted.items():
        if found.get(key) != value:
            entry = f"{key}={found.get(key) or '(absent)'} (wanted {value})"
            (allowed if tolerated and key in unsettable else wrong).append(entry)
    source = "network_tuning role (network_tuning_sysctl, _extra, _ephemeral_ports)"
    if wrong:
        return [
            view.result(
                "sysctl",
                Status.FAIL,
                measured=f"{len(wrong)} of {len(wanted)} differ",
                expected="as set by the role",
                source=source,
                detail="; ".join(wrong[:4]),
                action="run gpuprov bootstrap (network_tuning sets them again), or find what reset them",
            )
        ]
    if allowed:
        return [
            view.result(
                "sysctl",
                Status.WARN,
                measured=f"{len(allowed)} of {len(wanted)} not in force",
                source=source,
                expected="as set by the role",
                detail="cannot be set here (read-only; network_tuning_tolerate_unsettable is on): "
                + "; ".join(allowed[:3]),
                action="set them on the host the container or VM runs on, or leave them",
            )
        ]
    return [view.result("sysctl", Status.PASS, measured=f"{len(wanted)} in force", source=source)]


def nccl_conf(view: HostView) -> list[Result]:
    text = view.data.get("nccl_conf")
    wanted = expected.nccl_settings(view.vars)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(wanted.items())) or "no settings"
    source = "network_tuning role (network_tuning_nccl_*)"
    if text is None:
        return [
            view.result(
                "nccl-conf",
                Status.FAIL,
                measured="missing",
                expected=shown,
                source=source,
                action="run gpuprov bootstrap (network_tuning writes it)",
            )
        ]
    found = {}
    for line in str(text).splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    ok = found == wanted
    return [
        view.result(
            "nccl-conf",
            Status.PASS if ok else Status.FAIL,
            measured=", ".join(f"{k}={v}" for k, v in sorted(found.items())) or "no settings",
            expected=shown,
            source=source,
            action="" if ok else "run gpuprov bootstrap (network_tuning renders it again)",
        )
    ]


def nccl_interface(view: HostView) -> list[Result]:
    setting = str(
        view.vars.get("nccl_socket_ifname")
        or expected.variable(view.vars, "network_tuning", "network_tuning_nccl_socket_ifname")
        or ""
    )
    if not setting:
        return view.not_applicable(
            "nccl-interface", "NCCL_SOCKET_IFNAME is not set: NCCL picks the interface"
        )
    interfaces: Mapping[str, str] = view.data.get("interfaces") or {}
    problems = []
    for entry in (e.strip() for e in setting.split(",")):
        if not entry or entry.startswith("^"):
            continue
        exact = entry.startswith("=")
        name = entry[1:] if exact else entry
        matches = [i for i in interfaces if (i == name if exact else i.startswith(name))]
        if not matches:
            problems.append(f"{entry}: no such interface")
        elif not any(interfaces[i] in ("up", "unknown") for i in matches):
            problems.append(f"{entry}: {', '.join(f'{i} {interfaces[i]}' for i in matches)}")
    return [
        view.result(
            "nccl-interface",
            Status.FAIL if problems else Status.PASS,
            measured="; ".join(problems) or "up",
            expected=f"{setting} up",
            source="inventory (network_tuning_nccl_socket_ifname)",
            action="bring the interface up or fix network_tuning_nccl_socket_ifname" if problems else "",
        )
    ]


def infiniband(view: HostView) -> list[Result]:
    if not view.data.get("infiniband"):
        return view.not_applicable("infiniband", "no InfiniBand/RoCE device (/sys/class/infiniband is empty)")
    run = view.tool("ibstat")
    why = _did_not_run(run, "ibstat")
    if why:
        return [
            view.result("infiniband", Status.COULD_NOT_RUN, detail=why, action="install infiniband-diags")
        ]
    ports = parsers.ibstat(str(run.get("stdout", "")))
    wanted_rate = view.vars.get("gpuprov_check_ib_rate_gbps")
    results = []
    for port in ports:
        where = f"{port.ca} port {port.port}"
        problems = []
        if port.state != "Active" or port.physical_state != "LinkUp":
            problems.append(f"{port.state} / {port.physical_state}")
        if wanted_rate and port.rate is not None and port.rate < int(str(wanted_rate)):
            problems.append(f"rate {port.rate} < {wanted_rate}")
        results.append(
            view.result(
                "infiniband",
                Status.FAIL if problems else Status.PASS,
                measured=f"{where}: {port.state} / {port.physical_state} rate {port.rate}",
                expected="Active / LinkUp" + (f", rate >= {wanted_rate}" if wanted_rate else ""),
                unit="Gb/s",
                source="inventory (gpuprov_check_ib_rate_gbps)" if wanted_rate else "ibstat",
                action="check the cable, the switch port and the subnet manager" if problems else "",
            )
        )
    return results or [view.result("infiniband", Status.COULD_NOT_RUN, detail="ibstat listed no port")]


Check = Callable[[HostView], list[Result]]

CHECKS: dict[str, Check] = {
    "driver-package": driver_package,
    "driver-module": driver_module,
    "cuda": cuda,
    "cudnn": cudnn,
    "nccl": nccl,
    "holds": holds,
    "torch": python_env,  # also gives "python"
    "gpu-count": gpu_count,
    "cuda-driver": cuda_driver,
    "persistence": persistence,
    "xid": xid_events,
    "gpu-memory": gpu_memory,
    "matmul": matmul,
    "clocks": clocks,
    "pcie": pcie,
    "nvlink": nvlink,
    "peermem": peermem,
    "fabricmanager": fabricmanager,
    "dkms": dkms,
    "sysctl": sysctl,
    "nccl-conf": nccl_conf,
    "nccl-interface": nccl_interface,
    "infiniband": infiniband,
}
