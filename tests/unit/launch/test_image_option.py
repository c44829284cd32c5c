"""`--image` and `--push-image` on the command line (one error line, exit 2, nothing touched), and the call
into the image push (gpuprov.launch.image_push, a fake here: its module is helper push's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuprov.errors import GpuprovError
from gpuprov.launch import options
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error

DIGEST = "sha256:" + "ab" * 32


def launch(tmp_path: Path, *args: str) -> in_process.Result:
    (tmp_path / "train.py").write_text("print('hi')\n")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_host=127.0.0.1 ansible_port=1\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPUPROV_STATE_DIR": str(tmp_path / "state")}
    return in_process.gpuprov("launch", "-i", str(inventory), *args, "train.py", cwd=tmp_path, env=env)


def test_push_image_needs_an_image(tmp_path: Path) -> None:
    line = one_error(launch(tmp_path, "--push-image"), 2)
    assert line == "error: --push-image needs --image: name the image to push"


@pytest.mark.parametrize("image", ["-v", "a b", "torch:", "reg/x@", "x\ny"])
def test_an_image_that_is_no_reference_is_refused(tmp_path: Path, image: str) -> None:
    line = one_error(launch(tmp_path, "--image", image), 2)
    assert line.startswith(
        f"error: --image {image!r} is not an image reference; give NAME[:TAG][@sha256:DIGEST]"
    )


@pytest.mark.parametrize(
    "image", ["torch", "reg.example:5000/team/torch:2.13", f"nvcr.io/nvidia/pytorch:25.01-py3@{DIGEST}"]
)
def test_references_engines_take_are_kept(image: str) -> None:
    assert options.build(script=__file__, image=image).image == image


def test_check_and_bench_run_their_jobs_in_the_image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpuprov.bench import options as bench_options
    from gpuprov.bench import run as bench_run
    from gpuprov.check import bandwidth
    from gpuprov.launch import api

    asked: list[str | None] = []

    def run_job(script: Path, inventory: Path, names: list[str], **kwargs: Any) -> str:
        asked.append(kwargs.get("image"))
        raise GpuprovError("stop here")

    monkeypatch.setattr(api, "run_job", run_job)
    image = f"torch@{DIGEST}"
    with pytest.raises(GpuprovError):
        bandwidth.measure(tmp_path, ["node1"], image)
    opts = bench_options.BenchOptions(image=image)  # type: ignore[call-arg]
    with pytest.raises(GpuprovError):
        bench_run.one_run(opts, tmp_path, tmp_path / "node.py", ["node1"], api.AUTO, "1 node")
    assert asked == [image, image]
