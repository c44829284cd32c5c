"""Every role publishes what its verify step read back from the host in `gpuprov_verified`, merged across
roles, which `gpuprov bootstrap` shows at the end of a run and writes to summary.json. The roles' publish
tasks run here on localhost with the verify steps' registered results as recorded inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.local.roles.local_play import role_task, run_cases

RECORDED = Path(__file__).resolve().parents[2] / "recorded"

# What the verify steps registered on a Debian 12 host (shapes of dpkg-query's and the probe's output).
READ_BACK = {
    "__nvidia_driver_packages": ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"],
    "__nvidia_driver_dpkg": {
        "stdout_lines": [
            "nvidia-driver-cuda 550.127.08-1 hold ok installed",
            "nvidia-kernel-open-dkms 550.127.08-1 hold ok installed",
        ]
    },
    "__cuda_facts": {"stdout_lines": ["/usr/local/cuda-12.4", "12.4", "12.4.1"]},
    "__cudnn_installed": {
        "stdout_lines": [
            "libcudnn9-cuda-12 9.5.1.17-1 hold ok installed",
            "libcudnn9-dev-cuda-12 9.5.1.17-1 hold ok installed",
        ]
    },
    "__nccl_installed": {
        "stdout_lines": [
            "libnccl2 2.21.5-1+cuda12.4 hold ok installed",
            "libnccl-dev 2.21.5-1+cuda12.4 hold ok installed",
        ]
    },
    "__python_env_probe": {"stdout": json.dumps({"python_version": "3.11.2", "torch_version": "2.13.0+cpu"})},
    "python_env_pytorch": True,
    # `nvidia-ctk --version` (NVIDIA/nvidia-container-toolkit, cmd/nvidia-ctk: version line, then the commit).
    "__container_runtime_engine": "docker",
    "__container_runtime_ctk_version": {
        "stdout_lines": ["NVIDIA Container Toolkit CLI version 1.18.0", "commit: 0"]
    },
    # The mpi role's verify step: ompi_info --version on Debian 12 (tests/recorded/openmpi/), parsed there.
    "__mpi_version_read": {"stdout": (RECORDED / "openmpi" / "ompi_info-version-debian12.txt").read_text()},
}
PUBLISH = [
    role_task("nvidia_driver", "verify.yml", "Publish"),
    role_task("cuda", "verify.yml", "Publish"),
    role_task("cudnn", "verify.yml", "Publish"),
    role_task("nccl", "verify.yml", "Publish"),
    role_task("python_env", "verify.yml", "Publish"),
    role_task("container_runtime", "verify.yml", "Publish"),
    role_task("mpi", "verify.yml", "Take the version"),
    role_task("mpi", "verify.yml", "Publish"),
]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """gpuprov_verified after the publish tasks, with no driver module loaded and with one loaded: both in
    one ansible-playbook run (run_cases: the tasks run alone, no role file is loaded)."""
    tmp_path = tmp_path_factory.mktemp("verified")
    tasks = [
        {"ansible.builtin.setup": {"gather_subset": ["min"]}},
        *PUBLISH,
        {
            "ansible.builtin.copy": {
                "content": "{{ gpuprov_verified | to_json }}",
                "dest": f"{tmp_path}/{{{{ inventory_hostname }}}}.json",
                "mode": "0644",
            }
        },
    ]
    cases = {
        "unloaded": {**READ_BACK, "__nvidia_driver_loaded_version": "none"},
        "loaded": {**READ_BACK, "__nvidia_driver_loaded_version": "535.216.03"},
    }
    for name, result in run_cases(tmp_path, tasks, cases).items():
        assert not result.failed, (name, result.output[-3000:])
    return {name: dict(json.loads((tmp_path / f"{name}.json").read_text())) for name in cases}


def test_each_role_publishes_what_it_read_back(published: dict[str, dict[str, str]]) -> None:
    assert published["unloaded"] == {
        "driver": "550.127.08",  # no module loaded: the installed package
        "cuda": "12.4.1",
        "cudnn": "9.5.1.17",
        "nccl": "2.21.5+cuda12.4",
        "python": "3.11.2",
        "pytorch": "2.13.0+cpu",
        "container_engine": "docker",
        "container_toolkit": "1.18.0",
        "openmpi": "4.1.4",
    }


def test_the_loaded_driver_wins_over_the_package(published: dict[str, dict[str, str]]) -> None:
    """A host whose module is loaded (GPU present) runs that version: reboot pending shows the old one."""
    assert published["loaded"]["driver"] == "535.216.03"
