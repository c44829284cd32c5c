"""`--push-image` (gpuprov.launch.image_push) against a `docker save | ssh HOST podman load` loop on 4 hosts.

    .venv/bin/python benchmarks/push_image.py --inventory INV [--image REF] [--hosts 4] [--repeat 2]
                                              [--sandbox NAME] [--zstd]

The hosts (the inventory's first --hosts) run Podman, reached as `sudo -n podman` by the inventory's user
(a sandbox's nodes with the container_runtime role's Podman: `gpuprov bootstrap INV -e
container_runtime_enabled=true -e container_runtime_engine=podman --tags container_runtime`; it stores images
with its default overlay driver on each node's store volume, docs/sandbox.md). IMAGE is in this machine's
Docker Engine (default: the sandbox's debian12 node image, one 251 MB layer). In each repetition, each
way starts from hosts without the image (`podman rmi`, not timed):

  loop     for each host in turn: `docker save IMAGE | ssh HOST sudo -n podman load` (OpenSSH, the
           inventory's key and known_hosts, host key checking on)
  gpuprov  image_push.push_image: every host asked at once, the image saved once, streamed to all at once
  zstd     (--zstd) the loop with `zstd -1 -T1` on the controller: Podman 4.3 takes a zstd stream on stdin
           (not gzip: tests/recorded/container-engines); on a LAN, does compressing pay for its CPU?

Columns: wall seconds; the controller's CPU seconds (this process and its children: docker CLI, ssh, zstd);
dockerd's CPU seconds (it does the save); with --sandbox, the hosts' CPU seconds (their containers' cgroup
counters: sshd, podman, the helper). The sandbox's hosts share this machine's cores with the controller
and each other, so wall time says little about separate machines there; the CPU columns say where the work
went. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from cgroup_cpu import cpu_seconds, node_counters  # noqa: E402  (beside this script)

from gpuprov import hosts  # noqa: E402
from gpuprov.launch import image_push  # noqa: E402

DEFAULT_IMAGE = "gpuprov/node:debian12"  # the prefix of the sandbox node image's tag


def sudo_podman(host: hosts.Host) -> tuple[str, ...]:
    return ("sudo", "-n", "podman")


def ssh_words(host: hosts.Host) -> list[str]:
    words = ["ssh", "-p", str(host.port), "-o", f"UserKnownHostsFile={host.known_hosts}"]
    words += ["-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
    if host.key_file is not None:
        words += ["-i", str(host.key_file)]
    return [*words, f"{host.user}@{host.address}"]


def default_image() -> str:
    tags = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    found = [t for t in tags if t.startswith(DEFAULT_IMAGE)]
    if not found:
        raise SystemExit(f"no {DEFAULT_IMAGE}-* image in this machine's Docker Engine; give --image")
    return found[0]


def image_id(image: str) -> str:
    return subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def remove_everywhere(targets: list[hosts.Host], ident: str) -> None:
    for host in targets:
        script = f"sudo -n podman rmi -f {ident} >/dev/null 2>&1; sudo -n podman image prune -f >/dev/null"
        subprocess.run([*ssh_words(host), script], capture_output=True, check=False)


def dockerd_cpu() -> float:
    pid = Path("/var/run/docker.pid").read_text().strip()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def loop(image: str, targets: list[hosts.Host], compress: bool) -> None:
    for host in targets:
        ssh = " ".join(f"'{w}'" for w in ssh_words(host))
        middle = " | zstd -1 -T1 -q -c" if compress else ""
        line = f"set -o pipefail; docker save '{image}'{middle} | {ssh} sudo -n podman load -q"
        subprocess.run(["bash", "-c", line], check=True, capture_output=True)


def gpuprov(image: str, targets: list[hosts.Host]) -> None:
    report = image_push.push_image([image_push.HostTarget(h) for h in targets], image, engine_for=sudo_podman)
    error = report.error()
    if error is not None or report.names("loaded") != [h.name for h in targets]:
        raise SystemExit(f"push failed: {error.message if error else report}")


def measure(run: Callable[[], None], node_cpu: Callable[[], float]) -> dict[str, float]:
    started, cpu, daemon, nodes = time.monotonic(), own_cpu(), dockerd_cpu(), node_cpu()
    run()
    return {
        "wall": time.monotonic() - started,
        "cpu": own_cpu() - cpu,
        "dockerd": dockerd_cpu() - daemon,
        "hosts": node_cpu() - nodes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inventory", required=True, type=Path)
    parser.add_argument("--image", default=None)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sandbox", default=None, help="the sandbox's name: its nodes' CPU is counted")
    parser.add_argument("--zstd", action="store_true")
    args = parser.parse_args()
    image = args.image or default_image()
    ident = image_id(image)
    targets = hosts.load(args.inventory).hosts[: args.hosts]
    counters = node_counters(args.sandbox, len(hosts.load(args.inventory).hosts)) if args.sandbox else {}
    chosen = [counters[h.name] for h in targets if h.name in counters]

    def node_cpu() -> float:
        return sum(cpu_seconds(c) for c in chosen)

    ways: dict[str, Callable[[], None]] = {
        "loop": lambda: loop(image, targets, False),
        "gpuprov": lambda: gpuprov(image, targets),
    }
    if args.zstd:
        ways["loop + zstd"] = lambda: loop(image, targets, True)
    size = int(subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", image],
                              capture_output=True, text=True, check=True).stdout)  # fmt: skip
    print(f"image {image} ({size / 1e6:.0f} MB), {len(targets)} hosts, load average {os.getloadavg()[0]:.1f}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in ways}
    for _ in range(args.repeat):
        for name, run in ways.items():
            remove_everywhere(targets, ident)
            results[name].append(measure(run, node_cpu))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    table(results, bool(chosen))


def table(results: dict[str, list[dict[str, float]]], with_hosts: bool) -> None:
    columns = ["wall s", "controller CPU s", "dockerd CPU s"] + (["hosts' CPU s"] if with_hosts else [])
    keys = ["wall", "cpu", "dockerd"] + (["hosts"] if with_hosts else [])
    print(f"{'way':<12} " + " ".join(f"{c:>17}" for c in columns) + f" {'wall: loop / way':>17}")
    loop_wall = statistics.median(r["wall"] for r in results["loop"])
    for name, runs in results.items():
        cells = [statistics.median(r[k] for r in runs) for k in keys]
        spread = [f"{v:.1f}" for v in sorted(r["wall"] for r in runs)]
        print(
            f"{name:<12} "
            + " ".join(f"{v:>17.1f}" for v in cells)
            + f" {loop_wall / cells[0]:>16.2f}x"
            + f"   (walls: {', '.join(spread)})"
        )


if __name__ == "__main__":
    main()
