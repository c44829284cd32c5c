"""The Xid events that need action, with their meaning and where that comes from.

Only events whose meaning gpuprov could check in a published NVIDIA source are listed; any other Xid is
reported as a warning that names it and points at NVIDIA's catalog, not guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
_PAGE_RETIREMENT = "https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html"
_HEALTH_VALIDATION = "https://docs.nvidia.com/health-validation/reference/checks/xid.md"
_OPERATIONAL_EVENTS = "https://docs.nvidia.com/deploy/gpu-operational-events/latest/release-notes.html"


@dataclass(frozen=True)
class XidMeaning:
    meaning: str
    action: str
    source: str


NEEDS_ACTION: dict[int, XidMeaning] = {
    46: XidMeaning(
        "GPU stopped processing",
        "drain the host, reset the GPU; if it comes back, service",
        _HEALTH_VALIDATION,
    ),
    48: XidMeaning(
        "an uncorrectable double bit ECC error (DBE)",
        "drain the host and reset the GPU (or reboot); repeated DBEs: service the GPU",
        _PAGE_RETIREMENT,
    ),
    63: XidMeaning(
        "a page was retired (row remap recorded); it takes effect after a GPU reset",
        "reset the GPU or reboot the host when it is idle",
        _PAGE_RETIREMENT,
    ),
    64: XidMeaning(
        "a page could not be retired (row remap failed)",
        "drain the host and service the GPU",
        _PAGE_RETIREMENT,
    ),
    79: XidMeaning(
        "GPU has fallen off the bus",
        "drain the host; check power, cooling and the PCIe slot; reboot",
        _OPERATIONAL_EVENTS,
    ),
}
