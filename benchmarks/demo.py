"""How long the demo (scripts/demo.sh) takes from a fresh clone, in total and per phase.

    python benchmarks/demo.py [--ref REF] [--repo DIR] [--name NAME] [--keep] [--packages-cold] [--warm]

It clones REF (default HEAD) of DIR (default this checkout) into a new temporary directory and runs
scripts/demo.sh there as a user would, with what gpuprov and pip cache pointed at empty directories:

- GPUPROV_CACHE_DIR: no debootstrapped root file system, no sandbox package mirror, no downloaded wheels;
- GPUPROV_STATE_DIR: no sandbox, keys or run records;
- PIP_CACHE_DIR: no pip cache (pip still reads this machine's local package index, as CI's machines do);
- the clone's node image repository renamed (IMAGE_REPOSITORY in src/gpuprov/sandbox/images.py, the one
  line the clone changes) to `gpuprov-bench-demo/node`, so its node images are built cold and the images
  other checkouts on this machine use are neither reused nor removed.

What stays warm, and the report says so: the host packages (docker.io, debootstrap ... are installed and
cannot be removed on a shared machine; `--packages-cold` measures their download and install separately in
a chroot of the clone's fresh Debian 12 root file system), the running Docker engine, the kernel's page
cache, and this machine's local PyPI index and Debian mirror (CI's machines have the same).

Each output line is stamped with the seconds since the start; the phases are read from the lines the demo
and gpuprov print (`demo: <phase> took N s` and the timings table at the end), and the total is the wall
time of the whole script. The sandbox and the clone's images are removed at the end unless --keep.

The machine is shared, so wall time alone says little: at each phase's end the benchmark also reads CPU
counters (benchmarks/demo_cpu.py) and prints, per phase, the CPU seconds of the demo's own processes, of the
sandbox's containers and of the Docker daemons, what the rest of the machine used meanwhile ("others"), the
load average, and the floor (the demo's own CPU seconds over the core count: the least the phase could take
on an idle machine of this kind).

--warm leaves gpuprov's cache directory, pip's cache and the node image names as they are (only the state
directory is new): a fresh clone on a machine that has run the demo before. Run beside a cold run, it shows
what the machine-wide caches save, phase by phase.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from demo_cpu import DemoMeter, Sample, phase_table  # beside this script

TARGET_S = 180.0
BENCH_REPOSITORY = "gpuprov-bench-demo/node"
# The demo's host packages in setup.sh (DEMO_PACKAGES; HOST_PACKAGES before the demo had a list of its own).
HOST_PACKAGES_LINE = re.compile(r"^(?:DEMO_PACKAGES|HOST_PACKAGES)=\(([^)$]*)\)$", re.MULTILINE)


def clone(repo: Path, ref: str, into: Path, rename_images: bool) -> None:
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "-q", ref], check=True)
    if not rename_images:
        return
    images = into / "src/gpuprov/sandbox/images.py"
    text = images.read_text()
    renamed = re.sub(
        r'^IMAGE_REPOSITORY = ".*"$', f'IMAGE_REPOSITORY = "{BENCH_REPOSITORY}"', text, flags=re.M
    )
    if renamed == text:
        sys.exit(f"benchmarks/demo.py: no IMAGE_REPOSITORY line in {images}; cannot keep the images apart")
    images.write_text(renamed)


def demo_env(work: Path, warm: bool) -> dict[str, str]:
    """The demo's environment: an empty state directory; with warm=False empty caches too."""
    env = dict(os.environ)
    emptied = [("GPUPROV_STATE_DIR", "state")]
    if not warm:
        emptied += [("GPUPROV_CACHE_DIR", "cache"), ("PIP_CACHE_DIR", "pip")]
    for var, sub in emptied:
        (work / sub).mkdir()
        env[var] = str(work / sub)
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "/.venv/" not in p)
    return env


PHASE_DONE = re.compile(r"^demo: (?P<phase>.+) took [0-9.]+ s$")


def run_stamped(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    log: Path,
    on_line: Callable[[str], None],
    join: Callable[[], None],
) -> tuple[int, float]:
    """Run cmd, echo and log each output line with the seconds since the start, hand each line to on_line
    (join: the child's preexec_fn); (exit code, wall s)."""
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=join,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            on_line(line.rstrip())
            stamped = f"[{time.monotonic() - started:6.1f}] {line.rstrip()}"
            print(stamped, flush=True)
            out.write(stamped + "\n")
        code = proc.wait()
    return code, time.monotonic() - started


def run_measured(
    meter: DemoMeter, args: argparse.Namespace, clone_dir: Path, env: dict[str, str], work: Path
) -> tuple[int, float]:
    """The demo, with a CPU sample at its start and at each phase's end; prints the phase table after."""
    phases: list[tuple[str, Sample, Sample]] = []
    last = [meter.sample()]

    def on_line(line: str) -> None:
        done = PHASE_DONE.match(line)
        if done:
            now = meter.sample()
            phases.append((done["phase"], last[0], now))
            last[0] = now

    cmd = ["bash", "scripts/demo.sh", "--name", args.name]
    code, wall = run_stamped(cmd, clone_dir, env, work / "demo.log", on_line, meter.processes.join)
    cores = os.cpu_count() or 1
    print(f"\nCPU seconds per phase ({cores} cores; demo: {meter.processes.how}; sandbox: its containers';")
    print(
        "docker: dockerd + containerd; others: the machine's busy time less the demo's own; floor: own CPU /"
    )
    print(f"{cores} cores, the least wall time on an idle machine of {cores} cores)")
    for line in phase_table(phases, cores):
        print("  " + line)
    return code, wall


def packages_cold(clone_dir: Path, cache: Path, work: Path) -> float | None:
    """Seconds to download and install setup.sh's host packages into a copy of the fresh Debian 12 root
    file system the clone debootstrapped (what setup.sh does first on a fresh machine)."""
    tarballs = sorted((cache / "rootfs").glob("debian-bookworm-*.tar"))
    found = HOST_PACKAGES_LINE.search((clone_dir / "scripts/setup.sh").read_text())
    if not tarballs or not found:
        print("packages: no root file system or no HOST_PACKAGES line; not measured")
        return None
    root = work / "packages-root"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-xpf", str(tarballs[0])], check=True)
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
    sources = root / "etc/apt/sources.list"
    sources.write_text(f"deb {mirror_url(clone_dir)} bookworm main\n")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
    apt = ["chroot", str(root), "apt-get", "-q", "-o", "Acquire::Retries=3"]
    started = time.monotonic()
    subprocess.run([*apt, "update"], env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        [*apt, "install", "-y", "--no-install-recommends", *found.group(1).split()],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - started


def mirror_url(clone_dir: Path) -> str:
    code = "from gpuprov.sandbox import images; print(images.debian_mirror())"
    python = clone_dir / ".venv/bin/python"
    return subprocess.run(
        [str(python), "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def remove_bench_images() -> None:
    listed = subprocess.run(
        ["docker", "image", "ls", BENCH_REPOSITORY, "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    for ref in listed:
        subprocess.run(["docker", "image", "rm", ref], capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="HEAD")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--name", default="bench-demo")
    parser.add_argument("--keep", action="store_true", help="keep the clone, its sandbox and its images")
    parser.add_argument(
        "--packages-cold", action="store_true", help="also time the host packages in a chroot"
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="keep this machine's caches (gpuprov's cache dir, pip's cache, the node images): a second run",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gpuprov-bench-demo-"))
    clone_dir = work / "gpuprov"
    ref = subprocess.run(
        ["git", "-C", str(args.repo), "rev-parse", "--short", args.ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    clone(args.repo, args.ref, clone_dir, rename_images=not args.warm)
    env = demo_env(work, args.warm)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (1 min) at the start")
    caches = "this machine's caches warm" if args.warm else f"caches empty under {work}"
    print(f"clone of {args.repo} at {ref} in {clone_dir}; {caches}")
    meter = DemoMeter(args.name)
    code, wall = run_measured(meter, args, clone_dir, env, work)
    print(f"\nload average {os.getloadavg()[0]:.1f} (1 min) at the end; log: {work / 'demo.log'}")
    measure_packages = args.packages_cold and code == 0 and not args.warm
    packages = packages_cold(clone_dir, work / "cache", work) if measure_packages else None
    if not args.keep:
        subprocess.run(
            [str(clone_dir / ".venv/bin/gpuprov"), "-q", "sandbox", "down", "--name", args.name],
            env=env,
            check=False,
        )
        if not args.warm:
            remove_bench_images()
    meter.processes.close()  # after the sandbox: its nodes gone, the ssh masters in the group exit
    print(f"\ndemo from a fresh clone: {wall:.1f} s (target {TARGET_S:.0f} s), exit {code}")
    if packages is not None:
        print(f"host packages, measured apart in a chroot (warm on this machine): {packages:.1f} s")
        print(f"total with the host packages: {wall + packages:.1f} s")
    if not args.keep and code == 0:
        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
