"""The recovery-action check: the action the driver asks for each GPU (`nvidia-smi -q` "GPU Recovery Action").

Drivers from R565 print the field (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, added in NVML 565; the recordings
show it at 565.57.01, 570.124.06 and 580.159.04, and not at 550 or 555). It stays set until the action is
done, so unlike an Xid in the kernel log it is judged the same on every run. NVIDIA's GPU memory error
management guide names the actions: None (use the GPU again), Reset (`nvidia-smi -r`), Reboot (the OS may be
inconsistent), Drain P2P and Drain and Reset. Anything but None fails, named as nvidia-smi prints it: only
"None" and "Reset" have been seen in real outputs, so the other spellings are not guessed at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from gpuprov.check.gpu_checks import gpu_query
from gpuprov.check.host_view import HostView
from gpuprov.check.results import Result

FIELD = "GPU Recovery Action"
SOURCE = (
    "nvidia-smi -q GPU Recovery Action; NVIDIA, Error Recovery and Response Flags "
    "(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html)"
)
# What the field holds where the GPU or driver cannot answer: no action to judge, not a request.
_UNKNOWN = {"N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]"}


def recovery_action(view: HostView) -> list[Result]:
    """Fail when the driver asks for a GPU reset, a reboot or a drain, naming each GPU and the action."""
    query, otherwise = gpu_query(view, "recovery-action")
    if query is None:
        return otherwise
    actions = [(index, gpu["bus_id"], gpu.get(FIELD)) for index, gpu in enumerate(query.gpus)]
    if all(action is None for _, _, action in actions):
        return view.not_applicable(
            "recovery-action",
            f"nvidia-smi -q of driver {query.driver_version} has no {FIELD} field "
            "(drivers from R565 print it)",
        )
    asked = [
        f"GPU {index} ({bus_id}): {action}"
        for index, bus_id, action in actions
        if action not in (None, "None") and action not in _UNKNOWN
    ]
    return [
        view.verdict(
            "recovery-action",
            not asked,
            measured="; ".join(asked) or _tally(action for _, _, action in actions),
            expected="None",
            source=SOURCE,
            action="drain the host and do what the driver asks: Reset: stop the GPU's processes and run "
            "nvidia-smi -r; Reboot: reboot the node; Drain P2P: stop peer-to-peer work and read the field "
            "again",
        )
    ]


def _tally(actions: Iterable[str | None]) -> str:
    """What the GPUs answered: "None on 8 GPU(s)", or "None on 7 GPU(s), N/A on 1" where one cannot say."""
    counts = Counter(action or f"no {FIELD} field" for action in actions).most_common()
    return ", ".join(
        f"{value} on {count}{' GPU(s)' if n == 0 else ''}" for n, (value, count) in enumerate(counts)
    )
