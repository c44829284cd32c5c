"""scripts/gpu_devices_from_pci_ids.py, which writes playbooks/vars/gpu_devices.yml from pci.ids: on lines of
the pciutils/pciids pci.ids (commit c1c12547) it keeps NVIDIA's GPUs and drops their other functions, and
every row of the shipped table is one it would write."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import yaml

from gpuprov import gpu_generations

SCRIPT = Path(__file__).parents[2] / "scripts" / "gpu_devices_from_pci_ids.py"
PCI_IDS = (
    "# Version: 2026.08.22\n"
    "10de  NVIDIA Corporation\n"
    "\t1db1  GV100GL [Tesla V100 SXM2 16GB]\n"
    "\t\t10de 1212  Tesla V100-SXM2-16GB\n"
    "\t22a3  GH100 [H100 NVSwitch]\n"
    "\t22e8  GB202 High Definition Audio Controller\n"
    "\t2302  GH100\n"
    "\t2330  GH100 [H100 SXM5 80GB]\n"
    "\t2900  GB100 [Reserved Dev ID A]\n"
    "10df  Emulex Corporation\n"
    "\t1ae5  LP6000 Fibre Channel Host Adapter\n"
)


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_devices_from_pci_ids", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_keeps_the_gpus_of_nvidia_only(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "pci.ids").write_text(PCI_IDS)
    _script().main(tmp_path / "pci.ids", "c1c12547")
    written = yaml.safe_load(capsys.readouterr().out)["gpu_devices"]
    assert written == {
        "1db1": {"chip": "GV100GL", "name": "Tesla V100 SXM2 16GB"},
        "2302": {"chip": "GH100", "name": "GH100"},
        "2330": {"chip": "GH100", "name": "H100 SXM5 80GB"},
    }


def test_every_shipped_row_is_one_the_script_writes() -> None:
    script = _script()
    for device, row in gpu_generations.load_tables().devices.items():
        line = f"{row['chip']} [{row['name']}]" if row["name"] != row["chip"] else row["chip"]
        assert script.row(device, line) == f'  "{device}": {{chip: {row["chip"]}, name: "{row["name"]}"}}'
