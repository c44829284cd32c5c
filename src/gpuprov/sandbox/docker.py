"""The Docker engine: started (and installed) when missing, and driven through its CLI."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

from gpuprov import console, hosttools, paths
from gpuprov.errors import EnvironmentProblem, GpuprovError

ENGINE_START_TIMEOUT_S = 60


class DockerError(GpuprovError):
    """A docker command failed; the message holds the command and docker's own last line."""


def run(
    *args: str, check: bool = True, input: bytes | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `docker ARGS...` and return its output; raise DockerError with docker's message on failure."""
    cmd = ["docker", *args]
    console.detail("$ " + " ".join(cmd))
    proc = subprocess.run(
        cmd,
        input=input.decode() if input is not None else None,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise DockerError(f"'docker {' '.join(args[:2])}' failed: {last}")
    return proc


def inspect(kind: str, name: str) -> dict[str, Any] | None:
    """`docker KIND inspect NAME` as a dict, or None when no such object exists."""
    proc = run(kind, "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    data: list[dict[str, Any]] = json.loads(proc.stdout)
    return data[0] if data else None


def image_exists(ref: str) -> bool:
    return run("image", "inspect", ref, check=False).returncode == 0


def engine_running() -> bool:
    try:
        return run("info", "--format", "{{.ServerVersion}}", check=False, timeout=20).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False


def ensure_engine() -> None:
    """Make sure a Docker engine answers, installing docker.io and starting dockerd when needed."""
    hosttools.ensure({"docker": "docker.io"}, "the sandbox")
    if engine_running():
        return
    hosttools.ensure({"dockerd": "docker.io"}, "the sandbox")
    log = paths.cache_dir() / "dockerd.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    console.step(f"Docker engine is not running; starting dockerd (log: {log})")
    with open(log, "ab") as out:
        # A session of its own so the engine outlives this command and is not hit by its Ctrl-C.
        subprocess.Popen(
            ["dockerd"], stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ},
        )
    deadline = time.monotonic() + ENGINE_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if engine_running():
            console.success("Docker engine started")
            return
        time.sleep(0.5)
    raise EnvironmentProblem(
        f"the Docker engine did not start within {ENGINE_START_TIMEOUT_S} s; see {log} for why"
    )
