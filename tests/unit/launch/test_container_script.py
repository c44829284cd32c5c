"""run.sh of a `--image` job (templates/container.sh.j2 around the launcher's script): its exact text, valid
bash, and its lifetime with the agent: the container is removed by name after a normal exit, a rank's
failure, a stop (SIGTERM to the job) and a run.sh that was killed outright.

The engine here is a fake that keeps the parts of `docker run` this depends on: the container is started
in a session of its own (a real one is the engine's child, never in run.sh's process group), `--rm`
removes it when it exits, `kill --signal TERM NAME`, `wait NAME` and `rm -f NAME` act on it by name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.launch import options, plan, preflight
from gpuprov.launch.environments import container_run
from gpuprov.launch.environments.container_image import ContainerImage, HostFacts
from gpuprov.onhost import agent
from tests.unit.launch.test_agent import _agent, _alive, _wait_for
from tests.unit.launch.test_render import TORCHRUN, _commands

IMAGE = "registry.sandbox:5000/gpuprov/torch-cpu@sha256:" + "ab" * 32
JOB_ID = "20250101-000000-abcd"

FAKE_ENGINE = r"""#!/bin/bash
echo "$*" >> "$FAKE_STATE/log"
name=${@: -1}
case "$1" in
  run)
    while [ "$1" != --name ]; do shift; done; name=$2
    # the container names its pid once it is in a session of its own
    setsid bash -c 'echo $$ > "$0"; exec bash "$1"' "$FAKE_STATE/$name" "${@: -1}" &
    wait $!; rc=$?; rm -f "$FAKE_STATE/$name"; exit $rc ;;
  kill) [ -f "$FAKE_STATE/$name" ] && kill -TERM "$(cat "$FAKE_STATE/$name")" ;;
  wait)  # until the container's process has exited (its client may be gone)
    pid=$(cat "$FAKE_STATE/$name" 2>/dev/null) || exit 0
    while [ -e "/proc/$pid" ] && ! grep -q ') [ZX]' "/proc/$pid/stat" 2>/dev/null; do sleep 0.02; done ;;
  rm) [ -f "$FAKE_STATE/$name" ] && kill -KILL "$(cat "$FAKE_STATE/$name")"; rm -f "$FAKE_STATE/$name" ;;
esac
"""


def test_the_script_runs_the_launchers_script_in_the_jobs_one_container() -> None:
    inner = TORCHRUN.host_script(_commands()["node2"], None)
    text = container_run.wrap(
        inner, engine=container_run.Engine("docker", sudo=True), image=IMAGE,
        name=container_run.container_name(JOB_ID), job_dir=f".gpuprov/jobs/{JOB_ID}", gpus=True, ib=False,
    )  # fmt: skip
    assert text.startswith(
        "#!/usr/bin/env bash\n"
        f"# gpuprov job: this host's ranks run in {IMAGE} (docker), in one container, gpuprov-{JOB_ID}.\n"
    )
    assert f"cat > \"$job\"/in-container.sh <<'GPUPROV_END_OF_SCRIPT'\n{inner}GPUPROV_END_OF_SCRIPT\n" in text
    assert text.endswith(
        '"${engine[@]}" run --rm --name "$name" --sig-proxy=false \\\n'
        "  --init \\\n  --pull never \\\n  --network host \\\n  --ipc host \\\n"
        "  --ulimit memlock=-1:-1 \\\n  --ulimit stack=67108864 \\\n  --gpus all \\\n"
        '  --user "$(id -u):$(id -g)" --env HOME="$HOME" --env GPUPROV_JOB_ID \\\n'
        '  --volume "$HOME:$HOME" --workdir "$job" \\\n'
        f'  {IMAGE} bash "$job"/in-container.sh &\ncode=0\nwait $! || code=$?\nexit "$code"\n'
    )
    assert "engine=(sudo -n docker)\n" in text and f"name=gpuprov-{JOB_ID}\n" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_a_script_holding_the_end_marker_gets_another() -> None:
    text = container_run.wrap(
        "echo GPUPROV_END_OF_SCRIPT\n", engine=container_run.Engine("podman"), image=IMAGE, name="n",
        job_dir="j", gpus=False, ib=False,
    )  # fmt: skip
    assert "<<'GPUPROV_END_OF_SCRIPT_'\necho GPUPROV_END_OF_SCRIPT\nGPUPROV_END_OF_SCRIPT_\n" in text
    assert "  --security-opt label=disable \\\n" in text  # Podman: no SELinux label of its own (see docs)


def test_plan_wraps_each_hosts_script_with_its_engine() -> None:
    environment = ContainerImage(IMAGE)
    check = preflight.HostCheck(_host("node2"), python="python3", gpus=8)
    environment.facts["node2"] = HostFacts(container_run.Engine("podman", sudo=True), "sha256:x", ["uverbs0"])
    script = environment.host_script("echo ranks\n", JOB_ID, f".gpuprov/jobs/{JOB_ID}", check)
    assert "engine=(sudo -n podman)\n" in script
    assert (
        "  --device nvidia.com/gpu=all \\\n  --device /dev/infiniband \\\n  --cap-add IPC_LOCK \\\n" in script
    )
    assert environment.ib_hosts() == {"node2": ["uverbs0"]}
    built = plan.build_commands(JOB_ID, _opts(), [check], "10.0.0.1", 29501, "x.py", None, environment)
    assert built["node2"].python == "python3"  # the image's python (gpuprov_image_python, else python3)


def _host(name: str) -> hosts.Host:
    return hosts.Host(name, "10.0.0.2", 22, "u", None, Path("/k"))


def _opts() -> options.LaunchOptions:
    return options.LaunchOptions(script=Path("/tmp/x.py"))


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A job directory under a fake HOME whose PATH has the fake engine."""
    home, state, bin_dir = tmp_path / "home", tmp_path / "state", tmp_path / "bin"
    for directory in (home, state, bin_dir):
        directory.mkdir()
    (bin_dir / "docker").write_text(FAKE_ENGINE)
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FAKE_STATE", str(state))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    jobdir = home / ".gpuprov" / "jobs" / JOB_ID
    jobdir.mkdir(parents=True)
    (jobdir / "job_id").write_text(JOB_ID)
    return jobdir


def _start(jobdir: Path, inner: str) -> int:
    text = container_run.wrap(
        inner, engine=container_run.Engine("docker"), image=IMAGE, name=container_run.container_name(JOB_ID),
        job_dir=f".gpuprov/jobs/{JOB_ID}", gpus=False, ib=False,
    )  # fmt: skip
    (jobdir / "run.sh").write_text(text)
    return int(_agent("start", str(jobdir)).stdout)


def _engine_calls(jobdir: Path) -> list[str]:
    log = Path(os.environ["FAKE_STATE"]) / "log"
    return [line.split()[0] + " " + line.split()[-1] for line in log.read_text().splitlines()]


def _container_pid(jobdir: Path) -> int:
    return int(_wait_for(Path(os.environ["FAKE_STATE"]) / container_run.container_name(JOB_ID)))


@pytest.mark.parametrize("code", [0, 3])
def test_the_container_is_removed_when_the_ranks_end(job: Path, code: int) -> None:
    _start(job, f"echo ranks ran in $PWD; exit {code}\n")
    assert _wait_for(job / "exit_code") == str(code)
    assert "ranks ran in " + str(job) in (job / "job.log").read_text()
    name = container_run.container_name(JOB_ID)
    assert _engine_calls(job) == [f"run {job}/in-container.sh", f"rm {name}"]
    assert (job / "container").read_text() == f"{name}\ndocker\n"


def test_stop_ends_the_container_by_name_within_a_second(job: Path) -> None:
    _start(job, "trap 'exit 143' TERM; sleep 60 & wait\n")
    pid = _container_pid(job)
    started = time.monotonic()
    assert agent.stop(str(job), grace=5)["left"] == 0
    assert time.monotonic() - started < 1.0
    assert not _alive(pid)
    name = container_run.container_name(JOB_ID)
    # run.sh's rm, the agent's rm, then the agent's check that the engine no longer lists it
    assert _engine_calls(job)[1:] == [
        f"kill {name}",
        f"wait {name}",
        f"rm {name}",
        f"rm {name}",
        "ps {{.Names}}",
    ]
    assert _wait_for(job / "exit_code") == "143"


def test_stop_removes_the_container_when_run_sh_was_killed(job: Path) -> None:
    pgid = _start(job, "trap '' TERM; sleep 60\n")  # a container that ignores SIGTERM
    pid = _container_pid(job)
    os.killpg(pgid, signal.SIGKILL)  # run.sh and the engine's client gone, no trap ran
    _wait_for(job / "exit_code")
    assert _alive(pid)  # the container outlives its client, as Podman's does under conmon
    agent.stop(str(job), grace=1)
    assert not _alive(pid)
    assert _engine_calls(job)[-2:] == [f"rm {container_run.container_name(JOB_ID)}", "ps {{.Names}}"]


def test_the_jobs_gpu_flags_are_the_ones_the_container_runtime_role_probes_with() -> None:
    # review 23 item 8: the role's #48 probe must take the jobs' GPU path; both read the role's vars
    import yaml

    from gpuprov.launch.environments import container_run

    role_vars = Path(__file__).parents[3] / "roles" / "container_runtime" / "vars" / "main.yml"
    probed = yaml.safe_load(role_vars.read_text())["container_runtime_gpu_run_flags"]
    assert sorted(probed) == sorted(container_run.ENGINES)
    for engine in container_run.ENGINES:
        words = container_run.run_words(engine, gpus=True, ib=False)
        assert [flag for flag in container_run.run_flags(engine, True, False) if flag == probed[engine]]
        assert " ".join(probed[engine]) in " ".join(words)
        assert " ".join(probed[engine]) not in " ".join(container_run.run_words(engine, gpus=False, ib=False))
    assert probed == {"docker": ["--gpus", "all"], "podman": ["--device", "nvidia.com/gpu=all"]}


def test_a_missing_cdi_spec_names_the_service_that_writes_it() -> None:
    from gpuprov.launch.environments import container_run

    problem = container_run.toolkit_problem(
        container_run.Engine("podman", sudo=True), '{"host": {"security": {"rootless": false}}}', [], 8
    )
    assert problem is not None and "systemctl start nvidia-cdi-refresh.service" in problem
