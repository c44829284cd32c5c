"""Stand-in sysfs of an NVLink 5 system (HGX B200/B300): the InfiniBand devices whose PCI Vital Product
Data marks them as NVSwitch managers, beside a regular InfiniBand NIC.

Facts reproduced, with their sources:
- NVIDIA's driver container calls a host NVLink 5 when a file /sys/class/infiniband/*/device/vpd contains the
  bytes "SW_MNG" (NVIDIA/gpu-driver-container, `_assert_nvlink5_system` in rhel9/nvidia-driver and
  ubuntu24.04/nvidia-driver, commit 21abd7c "add support for nvlink5+ systems"; Bottlerocket reads the same
  file for the same bytes).
- On HGX B200/B300 the NVSwitches are managed through ConnectX-7 functions (PCI 15b3:1021, class 0x0207,
  InfiniBand) whose VPD holds "SMDL=SW_MNG"; regular ConnectX-7 NICs share the device id and lack it (a public
  confidential-computing host tool's `detect_cx7_bridge_pfs`, which reads it with lspci -vv).
- The VPD layout is the PCI one Mellanox's adapter manuals tabulate: a large-resource ID string (tag 0x82,
  16-bit little-endian length), VPD-R (0x90) with its keywords and the RV checksum keyword, the end tag 0x78.
Not recorded here: a real part's ID string, part and serial numbers, and which VPD-R keyword carries
"SMDL=SW_MNG"; the stand-in leaves the numbers out and puts the marker in the vendor-specific V1, so only the
bytes, which are all NVIDIA's container and gpuprov look for, are a fact.
"""

from __future__ import annotations

from pathlib import Path

CX7_DEVICE = "0x1021"  # ConnectX-7 (15b3:1021), the NVSwitch management function and the NIC alike
INFINIBAND_CLASS = "0x020700"


def _field(keyword: str, value: bytes) -> bytes:
    return keyword.encode() + bytes([len(value)]) + value


def vpd(*, switch_manager: bool) -> bytes:
    """A PCI VPD image: ID string, VPD-R (a V1 with SMDL=SW_MNG for a switch manager, RV with the checksum
    that makes the bytes up to it sum to zero), the end tag."""
    ident = b"ConnectX-7"
    fields = _field("V1", b"SMDL=SW_MNG") if switch_manager else b""
    head = bytes([0x82]) + len(ident).to_bytes(2, "little") + ident
    rv_length = 1
    body_length = len(fields) + 3 + rv_length
    vpd_r = bytes([0x90]) + body_length.to_bytes(2, "little") + fields + b"RV" + bytes([rv_length])
    checksum = (-sum(head + vpd_r)) & 0xFF
    return head + vpd_r + bytes([checksum, 0x78])


def write_infiniband(root: Path, devices: dict[str, bool]) -> Path:
    """ROOT/class/infiniband/<name>/device/{vpd,vendor,device,class} for each device (name: is it a switch
    manager); returns the class directory, for the role's __nvidia_driver_infiniband_class."""
    klass = root / "class" / "infiniband"
    for name, manager in devices.items():
        device = klass / name / "device"
        device.mkdir(parents=True)
        (device / "vpd").write_bytes(vpd(switch_manager=manager))
        (device / "vendor").write_text("0x15b3\n")
        (device / "device").write_text(f"{CX7_DEVICE}\n")
        (device / "class").write_text(f"{INFINIBAND_CLASS}\n")
    klass.mkdir(parents=True, exist_ok=True)
    return klass
