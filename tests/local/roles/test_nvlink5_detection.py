"""nvidia_driver's NVSwitch and NVLink 5 detection (the first two tasks of tasks/services.yml), run by real
ansible-playbook on this machine against stand-in sysfs trees (tests/standin_nvlink5.py): an HGX B200's
NVSwitches have no PCI function, so fabric manager is wanted there because an InfiniBand device's VPD holds
SW_MNG, as NVIDIA's driver container decides; a plain InfiniBand NIC, an HGX H100's PCI NVSwitches and the
fabric-manager setting each give their own answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import CaseResult, role_task, run_cases
from tests.standin_nvlink5 import write_infiniband

VARS = resources.data_dir("roles") / "nvidia_driver" / "vars" / "main.yml"
PATHS = ("__nvidia_driver_pci_devices", "__nvidia_driver_infiniband_class")
H100_NVSWITCH = {"vendor": "0x10de", "device": "0x22a3", "class": "0x068000"}  # H100 NVSwitch: pci.ids 22a3
B200_GPU = {"vendor": "0x10de", "device": "0x2901", "class": "0x030200"}  # B200: pci.ids 2901

# case: (PCI functions, InfiniBand devices {name: switch manager}, nvidia_driver_fabric_manager)
CASES: dict[str, tuple[list[dict[str, str]], dict[str, bool], str]] = {
    "hgx-b200": ([B200_GPU] * 8, {"mlx5_0": False, "mlx5_1": True, "mlx5_2": True}, "auto"),
    "plain-ib": ([B200_GPU] * 8, {"mlx5_0": False, "mlx5_1": False}, "auto"),
    "hgx-h100": ([B200_GPU] * 8 + [H100_NVSWITCH] * 4, {"mlx5_0": False}, "auto"),
    "no-ib": ([B200_GPU], {}, "auto"),
    "b200-forced-off": ([B200_GPU] * 8, {"mlx5_1": True}, "false"),
}


def pci_tree(root: Path, functions: list[dict[str, str]]) -> Path:
    devices = root / "bus" / "pci" / "devices"
    devices.mkdir(parents=True)
    for index, function in enumerate(functions):
        slot = devices / f"0000:{0x18 + index:02x}:00.0"
        slot.mkdir()
        for name, value in function.items():
            (slot / name).write_text(value + "\n")
    return devices


@pytest.fixture(scope="module")
def detected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    tmp_path = tmp_path_factory.mktemp("nvlink5")
    play_vars = {k: v for k, v in yaml.safe_load(VARS.read_text()).items() if k not in PATHS}
    cases = {}
    for name, (functions, infiniband, setting) in CASES.items():
        root = tmp_path / name
        cases[name] = {
            "__nvidia_driver_pci_devices": str(pci_tree(root, functions)),
            "__nvidia_driver_infiniband_class": str(write_infiniband(root, infiniband)),
            "nvidia_driver_fabric_manager": setting,
        }
    tasks = [
        role_task("nvidia_driver", "services.yml", "Count NVIDIA GPUs"),
        role_task("nvidia_driver", "services.yml", "Note the counts"),
        {
            "name": "Show the decision",
            "ansible.builtin.debug": {
                "msg": "decided gpus={{ __nvidia_driver_pci_gpu_count }}"
                " nvlink5={{ __nvidia_driver_nvlink5 }}"
                " fabric_manager={{ __nvidia_driver_fabric_manager }}"
            },
        },
    ]
    return run_cases(tmp_path, tasks, cases, play_vars=play_vars)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("hgx-b200", "gpus=8 nvlink5=True fabric_manager=True"),
        ("plain-ib", "gpus=8 nvlink5=False fabric_manager=False"),
        ("hgx-h100", "gpus=8 nvlink5=False fabric_manager=True"),
        ("no-ib", "gpus=1 nvlink5=False fabric_manager=False"),
        ("b200-forced-off", "gpus=8 nvlink5=True fabric_manager=False"),
    ],
)
def test_detection(detected: dict[str, CaseResult], case: str, expected: str) -> None:
    result = detected[case]
    assert not result.failed, result.output[-2000:]
    assert f"decided {expected}" in result.output, result.output[-2000:]
