"""launch --image against the inventory's lock, before any host is touched: exit 2 with one line for an
image the lock refuses (a tag where the lock pins its image by digest, an NGC release the locked driver
cannot run), a warning for an image other than the lock's. The host's port is closed: a run that went on to
SSH would end with exit 6, not 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuprov.errors import ExitCode
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error
from tests.unit.bad_input.test_bootstrap_inventory_sandbox import SAMPLE

DIGEST = "sha256:" + "ab" * 32
LOCKED = f"nvcr.io/nvidia/pytorch:24.05-py3@{DIGEST}"


def launch(tmp_path: Path, image: str, locked: str | None = LOCKED) -> in_process.Result:
    stack = yaml.safe_load((SAMPLE / "group_vars" / "all" / "gpu_stack.yml").read_text())["gpu_stack"]
    # R550: older than NGC 25.12 needs (the sample lock's R580 runs it through forward compatibility).
    stack |= {"driver_branch": "550", "driver_version": "550.127.08"}
    if locked is not None:
        stack["container_image"] = locked
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "gpu_stack.yml").write_text(yaml.safe_dump({"gpu_stack": stack}))
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_host=127.0.0.1 ansible_port=1\n")
    (tmp_path / "train.py").write_text("print('hi')\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    return in_process.gpuprov(
        "launch", "-i", str(inventory), "--image", image, "train.py", cwd=tmp_path, env=env
    )


def test_a_tag_where_the_lock_pins_its_image_by_digest_is_refused(tmp_path: Path) -> None:
    line = one_error(launch(tmp_path, "nvcr.io/nvidia/pytorch:24.05-py3"), ExitCode.BAD_INPUT)
    assert line.startswith("error: --image nvcr.io/nvidia/pytorch:24.05-py3 has a tag but no digest")
    assert line.endswith(f"(the lock's container_image is {LOCKED})")


@pytest.mark.parametrize("locked", [LOCKED, None])
def test_an_ngc_release_the_locked_driver_cannot_run_is_refused(tmp_path: Path, locked: str | None) -> None:
    image = f"nvcr.io/nvidia/pytorch:25.12-py3@{DIGEST}"
    line = one_error(launch(tmp_path, image, locked), ExitCode.BAD_INPUT)
    assert line.startswith("error: driver_version 550.127.08 cannot run NGC PyTorch 25.12 (CUDA 13.1.0)")


def test_another_image_than_the_locks_warns_and_goes_on_to_the_hosts(tmp_path: Path) -> None:
    image = f"registry.example:5000/team/train@{DIGEST}"
    result = launch(tmp_path, image)
    assert f"--image {image} is not the lock's container_image ({LOCKED})" in result.stdout + result.stderr
    assert result.returncode == ExitCode.HOSTS_UNREACHABLE  # it went on: port 1 is closed
