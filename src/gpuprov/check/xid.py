"""The Xid events that fail a host, with their meaning, what to do and where that comes from.

The list is Azure's node health check's (azurehpc-health-checks `customTests/azure_gpu_xid.nhc`, XID_EC:
48 56 57 58 62 63 64 65 68 69 73 74 79 80 81 92 119 120), which Azure runs on its A100 and H100 fleets, plus
46 (NVIDIA's Health Validation checks drain on it) and the ECC events of Ampere and newer GPUs: there an
uncorrectable memory error the GPU contained shows as Xid 94 without any Xid 48, and one it could not
contain as Xid 95 (NVIDIA's A100 GPU memory error management guide; stas00/ml-engineering debug.md shows
SRAM uncorrectable errors with 94 and no 48). Newer codes of NVIDIA's Xid page fail too: 140 (an
uncorrectable memory error the driver could not remap), 143 (GPU initialization failure) and 154 (the
driver's GPU recovery action changed), 154 unless its text says the new action is None. Any other Xid warns
and is named, not guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
AZURE_NHC = "Azure/azurehpc-health-checks customTests/azure_gpu_xid.nhc (XID_EC)"
_MEMORY_GUIDE = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/"
_HEALTH_VALIDATION = "https://docs.nvidia.com/health-validation/reference/checks/xid.md"
_XID_PAGE = "NVIDIA's Xid errors page https://docs.nvidia.com/deploy/xid-errors/index.html"
_RECOVERY_FLAG = (
    "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html"
)

_RESET = "drain the host and reset the GPU (nvidia-smi -r) or reboot; if it comes back, service the GPU"
_SERVICE = "drain the host and have the GPU serviced"


@dataclass(frozen=True)
class XidMeaning:
    meaning: str
    action: str
    source: str


def _azure(meaning: str, action: str = _RESET) -> XidMeaning:
    return XidMeaning(meaning, action, f"{AZURE_NHC}; meaning: NVIDIA's Xid catalog {CATALOG_URL}")


NEEDS_ACTION: dict[int, XidMeaning] = {
    46: XidMeaning("GPU stopped processing", _RESET, _HEALTH_VALIDATION),
    48: _azure("an uncorrectable double bit ECC error (DBE)"),
    56: _azure("display engine error"),
    57: _azure("error programming the video memory interface"),
    58: _azure("unstable video memory interface detected"),
    62: _azure("internal micro-controller halt"),
    63: _azure(
        "a row remap or page retirement was recorded; it takes effect after a GPU reset",
        "reset the GPU (nvidia-smi -r) or reboot the host when it is idle",
    ),
    64: _azure("a row remap or page retirement could not be recorded", _SERVICE),
    65: _azure("video processor exception"),
    68: _azure("video decoder (NVDEC) exception"),
    69: _azure("graphics engine class error"),
    73: _azure("video encoder (NVENC) error"),
    74: _azure("NVLink error", "drain the host, reset the GPUs or reboot; if it repeats, service the NVLink"),
    79: _azure(
        "GPU has fallen off the bus", "drain the host; check power, cooling and the PCIe slot; reboot"
    ),
    80: _azure("corrupted data sent to the GPU"),
    81: _azure("VGA subsystem error"),
    92: _azure("high single-bit ECC error rate"),
    94: XidMeaning(
        "a contained uncorrectable ECC error (Ampere and newer report it without Xid 48): the application "
        "that hit it was stopped, a row remap is pending",
        "restart the application; reset the GPU (nvidia-smi -r) or reboot when idle to apply the remap",
        f"{_MEMORY_GUIDE}; stas00/ml-engineering compute/accelerator/nvidia/debug.md",
    ),
    95: XidMeaning(
        "an uncontained uncorrectable ECC error: every application on the GPU is affected",
        _RESET,
        _MEMORY_GUIDE,
    ),
    119: _azure("GSP RPC timeout"),
    120: _azure("GSP error"),
    140: XidMeaning(
        "an unrecovered ECC error: uncorrectable errors in GPU memory that the driver could not mark for "
        "page offlining or row remapping",
        _RESET,
        f"{_XID_PAGE} (Xid 140, Unrecovered ECC Error)",
    ),
    143: XidMeaning("GPU initialization failure", _RESET, f"{_XID_PAGE} (Xid 143)"),
}

RECOVERY_ACTION_CHANGED = 154
# The driver's text, as real kernel logs show it: "GPU recovery action changed from 0x0 (None) to 0x2 (Node
# Reboot Required)" (also "0x1 (GPU Reset Required)", "0x1 (PF FLR)").
_CHANGED_TO = re.compile(r"recovery action changed from .*? to (0x[0-9a-fA-F]+) \(([^)]*)\)")


def recovery_action_meaning(text: str) -> XidMeaning | None:
    """Xid 154's verdict from its text: None when the new action is None, else what the driver asks."""
    match = _CHANGED_TO.search(text)
    if match and match.group(2).strip() == "None":
        return None
    asked = match.group(2) if match else "an action the text does not name"
    return XidMeaning(
        f"the driver's GPU recovery action changed to {asked}",
        "drain the host; do what the driver asks (nvidia-smi -q: GPU Recovery Action): reset the GPU "
        "(nvidia-smi -r) or reboot the node",
        f"{CATALOG_URL} (Xid 154 linkage); {_RECOVERY_FLAG}",
    )


def needs_action(code: int, text: str) -> XidMeaning | None:
    """What an Xid means and asks for when it fails a host; None when it only warns (or 154 asks nothing)."""
    if code == RECOVERY_ACTION_CHANGED:
        return recovery_action_meaning(text)
    return NEEDS_ACTION.get(code)
