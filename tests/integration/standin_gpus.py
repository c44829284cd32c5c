"""Stand-in GPUs for sandbox nodes: real GPUs' identities, as their PCI bus and nvidia-smi show them.

A sandbox node has no GPU. A test that needs one presents it: a tmpfs over /sys/bus/pci/devices (the node
has CAP_SYS_ADMIN) holding the GPU's PCI function (vendor, device, subsystem, class, as sysfs writes them)
and /etc/gpuprov/standin-gpus.conf, which the stand-in nvidia-smi reads (programs/gpus-conf.sh). Every
value is a real GPU's, from a recorded `nvidia-smi -q` of it (tests/recorded/nvidia-smi: "Device Id",
"Sub System Id", "Product Name", "Total" memory, its generation's compute capability), so gpuprov's
preflight identifies it as it would the real one (playbooks/vars/gpu_devices.yml, from pci.ids).
"""

from __future__ import annotations

from dataclasses import dataclass

CONF = "/etc/gpuprov/standin-gpus.conf"
PCI_DEVICES = "/sys/bus/pci/devices"
GPU_CLASS = "0x030200"  # 3D controller: what data-center GPUs show (the recorded H100's and V100's)


@dataclass(frozen=True)
class StandinGpu:
    device: str  # PCI device id ("Device Id 0x1DB110DE": device 1db1, vendor 10de)
    subsystem: str  # PCI subsystem device id ("Sub System Id 0x121210DE": 1212 of vendor 10de)
    smi_name: str  # nvidia-smi's "Product Name"
    memory_mib: int  # nvidia-smi's FB memory "Total"
    compute_cap: str
    recording: str  # the recorded `nvidia-smi -q` these values come from

    def present(self, count: int) -> list[str]:
        """Shell commands, run as root on a sandbox node, that make it show `count` of this GPU."""
        conf = (
            f'GPU_COUNT={count}\\nGPU_NAME=\\"{self.smi_name}\\"\\nMEMORY_MIB={self.memory_mib}\\n'
            f"COMPUTE_CAP={self.compute_cap}\\n"
        )
        commands = [
            f"mkdir -p /etc/gpuprov && printf '{conf}' > {CONF}",
            f"mount -t tmpfs tmpfs {PCI_DEVICES}",
        ]
        for index in range(count):
            slot = f"{PCI_DEVICES}/0000:{0x18 + 0x10 * index:02x}:00.0"  # the stand-in nvidia-smi's bus ids
            commands.append(
                f"mkdir {slot} && echo 0x10de > {slot}/vendor && echo 0x{self.device} > {slot}/device"
                f" && echo 0x10de > {slot}/subsystem_vendor"
                f" && echo 0x{self.subsystem} > {slot}/subsystem_device"
                f" && echo {GPU_CLASS} > {slot}/class"
            )
        return commands


def remove() -> list[str]:
    """Shell commands that take a presented GPU away again (the node's own PCI bus shows through)."""
    return [f"umount {PCI_DEVICES}", f"rm -f {CONF}"]


H100_SXM5_80GB = StandinGpu(
    "2330",
    "16c1",
    "NVIDIA H100 80GB HBM3",
    81559,
    "9.0",
    "tests/recorded/nvidia-smi/query-full-1xH100-580.159.04",
)
V100_SXM2_16GB = StandinGpu(
    "1db1",
    "1212",
    "Tesla V100-SXM2-16GB",
    16384,
    "7.0",
    "tests/recorded/nvidia-smi/query-full-1xV100-550.127.05",
)


def device_files(count: int) -> list[str]:
    """Shell commands that make /dev/nvidia0..count-1, as the NVIDIA driver does: character devices of major
    195, minor N (Linux's Documentation/admin-guide/devices.txt: "195 char Nvidia graphics devices",
    0 = /dev/nvidia0). Slurm's gres.conf names them (File=); slurmd stops when one does not exist (gres.c
    _my_stat: "can't stat gres.conf file"). A container may make device nodes but not open them."""
    return [f"mknod -m 0666 /dev/nvidia{index} c 195 {index}" for index in range(count)]


def remove_device_files(count: int) -> list[str]:
    return [f"rm -f /dev/nvidia{index}" for index in range(count)]
