"""`--image` and `--push-image` on the command line (one error line, exit 2, nothing touched), and the call
into the image push (gpuprov.launch.image_push, a fake here: its module is helper push's)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import image_delivery, options
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


class Report:
    def __init__(self, outcomes: list[tuple[str, str, str]]) -> None:
        self.outcomes = outcomes


def fake_push(monkeypatch: pytest.MonkeyPatch, outcomes: list[tuple[str, str, str]]) -> list[Any]:
    calls: list[Any] = []
    module = types.ModuleType("gpuprov.launch.image_push")

    def push_image(targets: list[hosts.Host], image: str, *, engine_for: Any) -> Report:
        calls.append(([t.name for t in targets], image, [engine_for(t) for t in targets]))
        return Report(outcomes)

    module.push_image = push_image  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpuprov.launch.image_push", module)
    return calls


def _hosts() -> list[hosts.Host]:
    return [
        hosts.Host(
            "node1", "10.0.0.1", 22, "u", None, Path("/k"), vars={"container_runtime_engine": "podman"}
        ),
        hosts.Host("node2", "10.0.0.2", 22, "u", None, Path("/k")),
    ]


def test_push_image_is_asked_for_every_selected_host_with_its_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_push(monkeypatch, [("node1", "had", ""), ("node2", "loaded", "")])
    image_delivery.push_missing(_hosts(), f"torch@{DIGEST}")
    assert calls == [(["node1", "node2"], f"torch@{DIGEST}", ["podman", None])]


def test_hosts_the_push_could_not_load_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_push(monkeypatch, [("node1", "failed", "no space left on device"), ("node2", "loaded", "")])
    with pytest.raises(GpuprovError) as raised:
        image_delivery.push_missing(_hosts(), f"torch@{DIGEST}")
    assert raised.value.exit_code == ExitCode.PREFLIGHT_FAILED
    assert str(raised.value) == (
        f"--push-image could not load torch@{DIGEST} on 1 host(s) (node1: no space left on device); "
        "nothing was started"
    )
    assert not isinstance(raised.value, BadInput)


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
