"""`gpuprov launch --image` preflight: each host's one check command run with bash, its engine a fake that
replays what Docker 20.10.24 and Podman 4.3.1 printed (tests/recorded/containers/, recorded on Debian 12
with Debian's docker.io and podman packages; see the README there). The check container's script itself
runs in the local shell, with probe.py and a stand-in torch, as it would inside the image.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts, ssh
from gpuprov.errors import ExitCode
from gpuprov.launch import preflight
from gpuprov.launch.environments import container_run
from gpuprov.launch.environments.container_image import ContainerImage
from gpuprov.launch.options import Nproc
from tests.unit.launch.test_probe import _torch
from tests.unit.launch.test_round_trips import Client, LocalChannel

RECORDED = Path(__file__).parents[2] / "recorded" / "containers"
IMAGE = "registry.sandbox:5000/gpuprov/torch-cpu@sha256:" + "ab" * 32
DOCKER, PODMAN = "docker-20.10.24", "podman-4.3.1"

# The fake engine: `info` and `image inspect` print the recorded answers of the engine the host has;
# `run` prints a recorded failure when the host has one, else runs the container's `sh -c SCRIPT` here,
# where `ulimit -l` answers as `--ulimit memlock=-1:-1` makes it when given (this machine cannot raise it).
FAKE_ENGINE = r"""#!/bin/bash
rec=$FAKE_RECORDED/$FAKE_ENGINE_VERSION
# the command's first line only, in one short write: hosts run at once, and a long echo is several writes
# that interleave with the other host's (CI once saw one "run" line where two ran)
line="$*"; printf '%s\n' "${line%%$'\n'*}" >> "$FAKE_LOG"
case "$1" in
  info) cat "$rec-${FAKE_INFO:-info}.json" ;;
  image)
    if [ -n "$FAKE_IMAGE_ID" ]; then echo "$FAKE_IMAGE_ID"; exit 0; fi
    cat "$rec-image-inspect-missing.txt"; exit "$FAKE_MISSING_RC" ;;
  run)
    if [ -n "$FAKE_RUN_ERROR" ]; then cat "$rec-$FAKE_RUN_ERROR.txt"; exit 125; fi
    args=("$@")  # -e K=V is set; a -v mount's target in a variable becomes its source (the host's dir)
    for ((i = 0; i < ${#args[@]}; i++)); do
      case "${args[i]}" in
        -e) export "${args[i+1]}" ;;
        -v) IFS=: read -r src dst _ <<< "${args[i+1]}"; mounts+=("$dst" "$src") ;;
      esac
    done
    for ((i = 0; i < ${#mounts[@]}; i += 2)); do
      [ "$GPUPROV_IMPORT_MARK_DIR" != "${mounts[i]}" ] || export GPUPROV_IMPORT_MARK_DIR="${mounts[i+1]}"
    done
    case " $* " in *" memlock=-1:-1 "*) exec bash -c "ulimit() { echo unlimited; }; ${@: -1}" ;; esac
    exec bash -c "${@: -1}" ;;
esac
"""


# sudo: `sudo -n true` answers FAKE_SUDO's rc; `sudo -n ENGINE ...` runs the engine as root would (the
# daemon's answer without the user's refusal).
FAKE_SUDO = r"""#!/bin/bash
[ "$1" = -n ] && shift
[ "${FAKE_SUDO:-1}" = 0 ] || exit 1
[ "$1" = true ] && exit 0
FAKE_INFO=$FAKE_ROOT_INFO exec "$@"
"""

HOST_TOOLS = (
    "bash", "sh", "cat", "grep", "ls", "id", "awk", "df", "tr", "ldconfig", "wc", "head", "sed", "mkdir",
)  # fmt: skip


class FakeHosts:
    """ssh.connect and ssh.open_channel over a local bash per host, each host's engine set by its env."""

    def __init__(self, tmp: Path, per_host: dict[str, dict[str, str]]) -> None:
        self.tmp = tmp
        self.log = tmp / "engine.log"
        self.per_host = per_host
        site = _torch(tmp / "site")
        self.base = {
            "HOME": str(tmp), "PYTHONPATH": str(site),
            "PYTHONDONTWRITEBYTECODE": "1", "FAKE_RECORDED": str(RECORDED), "FAKE_LOG": str(self.log),
        }  # fmt: skip
        for engine in ("docker", "podman", "none"):  # a directory per engine a host can have
            (tmp / f"bin-{engine}").mkdir()
            for tool in HOST_TOOLS:  # and the host's tools, without this machine's real engines
                found = shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin")
                if found:
                    (tmp / f"bin-{engine}" / tool).symlink_to(found)
            fakes = {"sudo": FAKE_SUDO} if engine == "none" else {engine: FAKE_ENGINE, "sudo": FAKE_SUDO}
            for name, text in fakes.items():
                (tmp / f"bin-{engine}" / name).write_text(text)
                (tmp / f"bin-{engine}" / name).chmod(0o755)
        self.round_trips: dict[str, int] = {}
        self.channels: list[LocalChannel] = []

    def connect(self, host: hosts.Host, timeout: float = 0) -> Any:
        return Client(host.name)

    def open_channel(self, client: Any, command: str, **_: Any) -> Any:
        self.round_trips[client] = self.round_trips.get(client, 0) + 1
        env = {**self.base, **self.per_host[client]}
        env["PATH"] = f"{self.tmp}/bin-{env['FAKE_ENGINE_ONLY']}"  # the host's tools and its one engine
        channel = LocalChannel(command, env)
        self.channels.append(channel)
        return ssh.Channel(channel)


def host_env(version: str = DOCKER, image_id: str | None = None, **extra: str) -> dict[str, str]:
    recorded_id = (RECORDED / f"{version}-image-inspect-id.txt").read_text().strip()
    env = {
        "FAKE_ENGINE_VERSION": version,
        "FAKE_IMAGE_ID": recorded_id if image_id is None else image_id,
        "FAKE_MISSING_RC": "1" if version == DOCKER else "125",
        "FAKE_ENGINE_ONLY": version.split("-")[0],
    }
    env.update(extra)
    return env


def run_preflight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_host: dict[str, dict[str, str]], **host_vars: Any
) -> tuple[FakeHosts, ContainerImage, preflight.Preflight | preflight.PreflightFailed]:
    fake = FakeHosts(tmp_path, per_host)
    monkeypatch.setattr(ssh, "connect", fake.connect)
    monkeypatch.setattr(ssh, "open_channel", fake.open_channel)
    selected = [
        hosts.Host(name, "127.0.0.1", 22, "u", None, tmp_path / "kh",
                   vars={"gpuprov_image_python": sys.executable, **host_vars})
        for name in per_host
    ]  # fmt: skip
    environment = ContainerImage(IMAGE)
    try:
        result: preflight.Preflight | preflight.PreflightFailed = preflight.run(
            selected, "127.0.0.1", None, Nproc("auto"), environment
        )
    except preflight.PreflightFailed as exc:
        result = exc
    return fake, environment, result


def problems(result: object) -> list[str]:
    assert isinstance(result, preflight.PreflightFailed), "preflight passed"
    return result.problems


@pytest.mark.parametrize("version", [DOCKER, PODMAN])
def test_hosts_with_the_image_pass_in_one_round_trip_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    fake, environment, result = run_preflight(
        tmp_path, monkeypatch, {"node1": host_env(version), "node2": host_env(version)}
    )
    assert isinstance(result, preflight.Preflight), getattr(result, "problems", None)
    assert [c.torch for c in result.checks] == ["2.13.0+cpu", "2.13.0+cpu"] and result.master_port
    assert fake.round_trips == {"node1": 1, "node2": 1}
    check = result.checks[0]
    assert check.python == "python3"  # the host's, for agent.py; the ranks use the image's
    assert environment.rank_python(check) == sys.executable
    assert environment.describe(check).startswith(
        f"{version.split('-')[0]}, image dc2e9b9faa20, torch 2.13.0"
    )
    # the check container ran with the job's flags, and nothing else was started
    runs = [line for line in fake.log.read_text().splitlines() if line.startswith("run ")]
    assert len(runs) == 2
    assert " ".join(container_run.run_words(version.split("-")[0], False, False)) in runs[0]
    result.close()
    for channel in fake.channels:
        channel.close()


@pytest.mark.parametrize("version", [DOCKER, PODMAN])
def test_the_image_s_good_import_is_kept_on_the_host_per_image_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """The check container's files go with it: the host keeps the mark of its last good `import torch` in
    a directory per image ID, so the next launch's check need not import torch again (as on bare metal)."""
    fake = FakeHosts(tmp_path, {"node1": host_env(version)})
    monkeypatch.setattr(ssh, "connect", fake.connect)
    monkeypatch.setattr(ssh, "open_channel", fake.open_channel)
    node = hosts.Host(
        "node1", "127.0.0.1", 22, "u", None, tmp_path / "kh", vars={"gpuprov_image_python": sys.executable}
    )
    importing = []
    for _ in range(2):
        result = preflight.run([node], "127.0.0.1", None, Nproc("auto"), ContainerImage(IMAGE))
        importing.append(result.checks[0].importing)
        result.close()
    assert importing == [True, False]
    image_id = (RECORDED / f"{version}-image-inspect-id.txt").read_text().strip().removeprefix("sha256:")
    assert len(list((tmp_path / ".gpuprov" / "image-imports" / image_id).iterdir())) == 1
    assert not (tmp_path / ".gpuprov" / "torch-import-ok").exists()  # not the host env's mark
    for channel in fake.channels:
        channel.close()


def test_an_image_missing_on_some_hosts_is_one_problem_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_host = {"node1": host_env(), "node2": host_env(image_id=""), "node3": host_env(PODMAN, image_id="")}
    _, _, result = run_preflight(tmp_path, monkeypatch, per_host)
    assert problems(result) == [
        f"image {IMAGE} is not on node2, node3; pull it there, or give --push-image to stream it from this "
        "machine"
    ]
    assert isinstance(result, preflight.PreflightFailed) and result.exit_code == ExitCode.PREFLIGHT_FAILED


def test_another_image_id_on_a_host_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = "sha256:" + "0123456789ab" + "c" * 52
    per_host = {"node1": host_env(), "node2": host_env(PODMAN), "node3": host_env(image_id=other)}
    _, _, result = run_preflight(tmp_path, monkeypatch, per_host)
    # Docker's "sha256:..." and Podman's bare ID name the same image: node1 and node2 agree
    assert problems(result) == [
        f"image {IMAGE} differs between hosts (image ID: node3 0123456789ab; node1, node2 dc2e9b9faa20); "
        "give the image by digest (NAME@sha256:...) and pull it again on the hosts that differ"
    ]


def test_a_host_without_an_engine_is_told_to_apply_the_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_host = {"node1": host_env(), "node2": host_env(FAKE_ENGINE_ONLY="none")}
    _, _, result = run_preflight(tmp_path, monkeypatch, per_host)
    assert problems(result) == [
        "node2: no container engine (docker or podman); apply the container_runtime role "
        "(`gpuprov bootstrap -e container_runtime_enabled=true`)"
    ]


def test_a_gpu_host_whose_docker_has_no_nvidia_runtime_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, result = run_preflight(tmp_path, monkeypatch, {"node1": host_env()}, gpuprov_gpu_count=2)
    assert problems(result) == [
        "node1: the host has 2 GPU(s) but Docker has no nvidia runtime (docker info Runtimes: "
        "io.containerd.runc.v2, io.containerd.runtime.v1.linux, runc; NVIDIA Container Toolkit's `nvidia-ctk "
        "runtime configure` adds it); apply the container_runtime role "
        "(`gpuprov bootstrap -e container_runtime_enabled=true`)"
    ]


def test_a_user_docker_refuses_is_served_through_sudo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # recorded: `docker info` as a user outside the docker group exits 0, its JSON holding ServerErrors
    per_host = {"node1": host_env(FAKE_INFO="info-socket-denied", FAKE_SUDO="0", FAKE_ROOT_INFO="info")}
    _, environment, result = run_preflight(tmp_path, monkeypatch, per_host)
    assert isinstance(result, preflight.Preflight), getattr(result, "problems", None)
    assert environment.describe(result.checks[0]).startswith("sudo -n docker, image dc2e9b9faa20")
    result.close()


def test_a_docker_the_user_may_not_use_without_sudo_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_host = {"node1": host_env(FAKE_INFO="info-socket-denied", FAKE_SUDO="1")}
    _, _, result = run_preflight(tmp_path, monkeypatch, per_host)
    assert problems(result) == [
        "node1: `docker info` failed (permission denied while trying to connect to the Docker daemon socket "
        'at unix:///var/run/docker.sock: Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.24/info": dial unix '
        "/var/run/docker.sock: connect: permission denied); start the engine, or apply the container_runtime "
        "role (`gpuprov bootstrap -e container_runtime_enabled=true`)"
    ]


def test_a_gpu_host_whose_docker_has_the_nvidia_runtime_passes_the_toolkit_check() -> None:
    info = (RECORDED / f"{DOCKER}-info-nvidia-runtime.json").read_text()
    assert container_run.toolkit_problem(container_run.Engine("docker", sudo=True), info, [], gpus=8) is None


def test_a_gpu_host_whose_podman_has_no_cdi_spec_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, result = run_preflight(tmp_path, monkeypatch, {"node1": host_env(PODMAN)}, gpuprov_gpu_count=1)
    assert problems(result)[0].startswith(
        "node1: the host has 1 GPU(s) but no CDI spec names nvidia.com/gpu (in /etc/cdi or /var/run/cdi"
    )


@pytest.mark.parametrize(
    ("version", "failure", "said"),
    [
        (DOCKER, "run-memlock-denied", "error setting rlimit type 8: operation not permitted: unknown"),
        (
            PODMAN,
            "run-init-without-catatonit",
            "stat /usr/libexec/podman/catatonit: no such file or directory",
        ),
    ],
)
def test_a_check_container_that_does_not_start_shows_the_engines_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, failure: str, said: str
) -> None:
    _, _, result = run_preflight(tmp_path, monkeypatch, {"node1": host_env(version, FAKE_RUN_ERROR=failure)})
    (problem,) = problems(result)
    assert problem.startswith(f"node1: the check container of {IMAGE} did not start: ") and problem.endswith(
        said
    )


def test_an_image_without_torch_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, result = run_preflight(
        tmp_path, monkeypatch, {"node1": host_env(PYTHONPATH=str(tmp_path / "nothing"))}
    )
    assert problems(result) == [
        f"node1: the image {IMAGE} has no usable torch (ImportError: No module named 'torch')"
    ]


def test_the_recorded_default_shm_is_too_small_for_nccl_and_ipc_host_is_not() -> None:
    def seen(name: str) -> dict[str, str]:
        text = (RECORDED / f"{DOCKER}-{name}.txt").read_text()
        return dict(line.split(" ", 1) for line in text.splitlines()) | {"memlock": "unlimited"}

    assert container_run.inside_problems(seen("inside-default-ipc"), [], gpus=8) == [
        "/dev/shm inside the container is 65536 KiB; NCCL needs at least 1 GiB (nccl#290, #342): give the "
        "host a larger /dev/shm"
    ]
    assert container_run.inside_problems(seen("inside-default-ipc"), [], gpus=0) == []  # gloo: no NCCL
    assert container_run.inside_problems(seen("inside-ipc-host"), [], gpus=8) == []


def test_ib_devices_the_container_does_not_see_and_a_missing_verbs_library_are_problems() -> None:
    seen = {"memlock": "unlimited", "shm": str(32 << 20), "ib": "uverbs0", "verbs": "0"}
    assert container_run.inside_problems(seen, ["rdma_cm", "uverbs0"], gpus=8) == [
        "InfiniBand devices rdma_cm are not visible inside the container",
        "the host has InfiniBand but the image has no libibverbs, so NCCL would fall back to sockets "
        "(nccl#451); use an image with rdma-core (NVIDIA's NGC images have it)",
    ]
    low = {**seen, "memlock": "8192", "verbs": "2", "ib": "rdma_cm uverbs0"}
    memlock = container_run.inside_problems(low, ["rdma_cm", "uverbs0"], gpus=8)
    assert memlock == ["memlock inside the container is 8192 KiB, not unlimited"]
    # gloo over TCP pins no memory: a host without GPUs or IB keeps the engine's default limit
    assert container_run.inside_problems({**low, "ib": ""}, [], gpus=0) == []


def test_rootless_podman_is_refused() -> None:
    info = (RECORDED / f"{PODMAN}-info.json").read_text().replace('"rootless": false', '"rootless": true')
    problem = container_run.toolkit_problem(container_run.Engine("podman"), info, [], gpus=0)
    assert problem is not None and problem.startswith("Podman runs rootless for this user")


def test_the_check_command_is_valid_bash_for_each_choice() -> None:
    from gpuprov.launch.environments.container_image import host_check_command

    for wanted in (None, "docker", "podman"):
        for count in (True, False):
            command = host_check_command(IMAGE, wanted, count, "python3")
            checked = os.popen(f"bash -n -c {shlex.quote(command)} 2>&1").read()
            assert checked == ""
