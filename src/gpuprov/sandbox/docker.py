"""The Docker engine: started (and installed) when missing, and driven through its CLI."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from gpuprov import console, hosttools, interrupts, paths
from gpuprov.errors import EnvironmentProblem, GpuprovError

ENGINE_START_TIMEOUT_S = 60


class DockerError(GpuprovError):
    """A docker command failed; the message holds the command and docker's own last line."""


def run(
    *args: str, check: bool = True, input: bytes | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `docker ARGS...` and return its output; raise DockerError with docker's message on failure.

    input is passed as bytes (a tar stream for `docker cp -`); output comes back as text.
    """
    cmd = ["docker", *args]
    console.detail("$ " + " ".join(cmd))
    interrupts.check()
    # A session of its own: a Ctrl-C at the terminal must not cut a docker command off half-way;
    # gpuprov acts on the interrupt between commands (gpuprov.interrupts).
    raw = subprocess.run(
        cmd, input=input, capture_output=True, check=False, timeout=timeout, start_new_session=True
    )
    interrupts.check()
    proc = subprocess.CompletedProcess(
        cmd, raw.returncode, raw.stdout.decode(errors="replace"), raw.stderr.decode(errors="replace")
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
        daemon = subprocess.Popen(
            ["dockerd"], stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True
        )
    deadline = time.monotonic() + ENGINE_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if engine_running():
            console.success("Docker engine started")
            return
        if daemon.poll() is not None:
            raise EnvironmentProblem(
                f"the Docker engine (dockerd) exited with status {daemon.returncode} while starting: "
                f"{_last_line(log)}; see {log}"
            )
        time.sleep(0.5)
    raise EnvironmentProblem(
        f"the Docker engine did not start within {ENGINE_START_TIMEOUT_S} s; see {log} for why"
    )


def _last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no output"
