"""Per-host checks of installed versions against the lock: driver, CUDA, cuDNN, NCCL, holds, the env."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from gpuprov.check import expected, parsers
from gpuprov.check.host_view import LOCK, NO_GPU, HostView, did_not_run, upstream
from gpuprov.check.results import Result, Status

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
    return [
        view.verdict(
            "driver-module",
            measured == wanted,
            measured=measured,
            expected=wanted,
            source=LOCK,
            action="reboot the host so the installed (locked) driver's module is loaded",
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
    return [
        view.verdict(
            "cuda",
            found == wanted,
            measured=found,
            expected=wanted,
            source=LOCK,
            action="run gpuprov bootstrap to install the locked CUDA toolkit",
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
        view.verdict(
            check,
            not wrong,
            measured=", ".join(wrong) if wrong else wanted,
            expected=wanted,
            source=LOCK,
            action="run gpuprov bootstrap",
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
        view.verdict(
            "holds",
            not loose,
            measured=f"{len(wanted) - len(loose)} of {len(wanted)} held",
            expected="every stack package held",
            source="the roles' *_hold variables (default true)",
            detail=("not held: " + ", ".join(loose[:6])) if loose else "",
            action="run gpuprov bootstrap (it holds them again)",
        )
    ]


_LOCAL_TAG = re.compile(r"\+(.+)$")


def python_env(view: HostView) -> list[Result]:
    run = view.tool("env")
    python = str(view.data.get("python_path") or "")
    why = did_not_run(run, f"the env's python ({python})")
    if run.get("skipped"):  # not started: the GPU's driver is hung (hostprobe)
        return [view.result("torch", Status.COULD_NOT_RUN, detail=str(why), action="see the gpu-count check")]
    if why:
        return [view.result("torch", Status.FAIL, detail=why, action="run gpuprov bootstrap (python_env)")]
    try:
        info = json.loads(str(run.get("stdout", "")).strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (str(run.get("stderr", "")).strip().splitlines() or ["no output"])[-1]
        return [view.result("torch", Status.FAIL, detail=f"{python}: {last}", action="run gpuprov bootstrap")]
    python_result = _python(view, info)
    if "error" in info:
        failed = view.result(
            "torch",
            Status.FAIL,
            detail=f"import torch failed: {info['error']}",
            action="run gpuprov bootstrap (python_env rebuilds the env)",
        )
        return [python_result, failed]
    return [python_result, _torch(view, info)]


def _python(view: HostView, info: Mapping[str, object]) -> Result:
    """The env's Python against the inventory's python_env_python_version (3.11 matches 3.11.2)."""
    wanted = view.vars.get("python_env_python_version")
    found = str(info.get("python", ""))
    if not wanted:
        return view.result(
            "python", Status.PASS, measured=found, detail="not locked: only compared across hosts"
        )
    return view.verdict(
        "python",
        found == str(wanted) or found.startswith(f"{wanted}."),
        measured=found,
        expected=str(wanted),
        source="inventory (python_env_python_version)",
        action="run gpuprov bootstrap",
    )


def _torch(view: HostView, info: Mapping[str, object]) -> Result:
    torch = str(info.get("torch", ""))
    tag_match = _LOCAL_TAG.search(torch)
    base = torch.split("+", 1)[0]
    wanted = f"{view.lock.get('pytorch_version', '')}+{view.lock.get('pytorch_cuda_tag', '')}"
    tag = view.lock.get("pytorch_cuda_tag", "")
    ok = base == view.lock.get("pytorch_version") and (tag_match is None or tag_match.group(1) == tag)
    cuda = info.get("torch_cuda")
    if ok and tag != "cpu" and cuda:  # the CUDA torch was built for: cu124 -> 12.4
        ok = tag == "cu" + str(cuda).replace(".", "")
    return view.verdict(
        "torch",
        ok,
        measured=torch + (f" (CUDA {cuda})" if cuda else ""),
        expected=wanted,
        source=LOCK,
        action="run gpuprov bootstrap (python_env installs the locked PyTorch)",
    )
