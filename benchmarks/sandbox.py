"""How long `gpuprov sandbox up` and `down` take, against plain docker doing the least it could.

Baseline, measured in the same run: `docker run` of the same node image for each node (and the mirror)
and waiting until each node's sshd accepts TCP, then `docker rm -f` of them. gpuprov does more on top
(keys, host keys, known_hosts, a real SSH login with sudo on every node, the inventory), so the ratio
shows what that costs.

    python benchmarks/sandbox.py [--nodes 2] [--repeat 3] [--cold]

--cold also measures a first `up` with no cached images or mirror (it removes gpuprov's node images and
uses an empty cache directory; they are rebuilt by the measurement itself).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

from gpuprov.sandbox import images

TARGETS_S = {"warm up": 20.0, "cold up": 240.0, "down": 5.0}
GPUPROV = [sys.executable, "-m", "gpuprov", "-q"]


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def gpuprov(env: dict[str, str], *args: str) -> None:
    subprocess.run([*GPUPROV, *args], env=env, check=True)


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout.strip()


def wait_for_port(address: str, port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex((address, port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{address}:{port} did not open")


def baseline_up(nodes: int, name: str) -> list[str]:
    image = images.ensure_image("debian12")
    docker("network", "create", name)
    containers = [docker("run", "-d", "--network", name, image, "sleep", "infinity")]  # the mirror's place
    for _ in range(nodes):
        containers.append(docker("run", "-d", "--network", name, *images.RUN_ARGS, image))
    for container in containers[1:]:
        address = docker(
            "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container
        )
        wait_for_port(address, 22)
    return containers


def baseline_down(containers: list[str], name: str) -> None:
    docker("rm", "-f", *containers)
    docker("network", "rm", name)


def one_round(env: dict[str, str], nodes: int) -> tuple[float, float, float, float]:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    up_s = timed(lambda: gpuprov(env, "sandbox", "up", "--name", name, "--nodes", str(nodes)))
    down_s = timed(lambda: gpuprov(env, "sandbox", "down", "--name", name))
    containers: list[str] = []
    base_up_s = timed(lambda: containers.extend(baseline_up(nodes, name)))
    base_down_s = timed(lambda: baseline_down(containers, name))
    return up_s, down_s, base_up_s, base_down_s


def measure(args: argparse.Namespace) -> list[tuple[str, float, float | None]]:
    rows: list[tuple[str, float, float | None]] = []
    state = tempfile.mkdtemp(prefix="gpuprov-bench-state-")
    env = {**os.environ, "GPUPROV_STATE_DIR": state}
    if args.cold:
        cache = tempfile.mkdtemp(prefix="gpuprov-bench-cache-")
        cold_env = {**env, "GPUPROV_CACHE_DIR": cache}
        for ref in docker("images", "-q", "--filter", "label=gpuprov.image").split():
            subprocess.run(["docker", "rmi", "-f", ref], capture_output=True)
        name = f"bench-{uuid.uuid4().hex[:6]}"
        cold = timed(lambda: gpuprov(cold_env, "sandbox", "up", "--name", name, "--nodes", str(args.nodes)))
        gpuprov(cold_env, "sandbox", "down", "--name", name)
        rows.append(("cold up", cold, None))
    else:
        gpuprov(env, "sandbox", "up", "--name", "bench-warmup", "--nodes", "1")  # build caches outside timing
        gpuprov(env, "sandbox", "down", "--name", "bench-warmup")

    ups, downs, base_ups, base_downs = [], [], [], []
    for _ in range(args.repeat):
        up_s, down_s, base_up_s, base_down_s = one_round(env, args.nodes)
        ups.append(up_s)
        downs.append(down_s)
        base_ups.append(base_up_s)
        base_downs.append(base_down_s)
    rows.append(("warm up", statistics.median(ups), statistics.median(base_ups)))
    rows.append(("down", statistics.median(downs), statistics.median(base_downs)))
    return rows


def print_table(rows: list[tuple[str, float, float | None]], nodes: int) -> None:
    print(f"\nsandbox with {nodes} nodes (median of runs; baseline = plain docker run + sshd port open)\n")
    print(f"| {'measure':<8} | {'gpuprov':>8} | {'baseline':>8} | {'ratio':>5} | {'target':>7} | ok  |")
    print(f"|{'-' * 10}|{'-' * 10}|{'-' * 10}|{'-' * 7}|{'-' * 9}|-----|")
    for measure_name, value, base in rows:
        target = TARGETS_S[measure_name]
        base_text = f"{base:7.2f}s" if base is not None else "       -"
        ratio = f"{value / base:5.1f}" if base else "    -"
        ok = "yes" if value < target else "NO"
        print(f"| {measure_name:<8} | {value:7.2f}s | {base_text} | {ratio} | <{target:5.0f}s | {ok:<3} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="also measure a first up with nothing cached")
    args = parser.parse_args()
    print_table(measure(args), args.nodes)


if __name__ == "__main__":
    main()
