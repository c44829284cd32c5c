"""Local Docker images that the sandbox runs as test hosts, one per supported operating system.

No container registry is reachable, so every image is built here: debootstrap makes a Debian 12 root file
system once (cached as a tarball), and each image is a copy of it with a few changes, imported with
`docker import`. Only Debian 12 is real; the other systems are stand-ins that make Ansible take their code
paths:

- "ubuntu-like": the Debian rootfs with Ubuntu's /etc/os-release and /etc/lsb-release, so Ansible reports
  distribution Ubuntu, os_family Debian.
- "rocky-like": the Debian rootfs plus Debian's dnf and rpm, Rocky Linux's release files and an empty rpm
  database, so Ansible reports os_family RedHat with pkg_mgr dnf.

Images are tagged with a hash of everything that determines their content, so a changed recipe builds a new
image and an unchanged one is reused at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gpuprov import console, hosttools, paths
from gpuprov.errors import BadInput, EnvironmentProblem, GpuprovError
from gpuprov.sandbox import docker

# Bump when a change to the build is not visible in this file's text (it is hashed too) yet must rebuild.
RECIPE_VERSION = 1

IMAGE_REPOSITORY = "gpuprov/node"
LABEL_OS = "gpuprov.image"
LABEL_HASH = "gpuprov.image.hash"

# What `docker run` needs for systemd as PID 1 on this kind of host (cgroup v1, --privileged fails).
# SIGRTMIN+3 asks systemd to shut down; the default SIGTERM only makes it re-execute itself, so `docker
# stop` would wait 10 s and kill it. (`docker import` cannot set STOPSIGNAL in the image.)
# NET_ADMIN lets the firewall (ufw, firewalld) and the network sysctls work in the container's own network
# namespace.
RUN_ARGS: tuple[str, ...] = (
    "--cap-add", "SYS_ADMIN",
    "--cap-add", "NET_ADMIN",
    "--security-opt", "seccomp=unconfined",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro",
    "--tmpfs", "/run",
    "--tmpfs", "/run/lock",
    "--stop-signal", "SIGRTMIN+3",
)  # fmt: skip

DEBIAN_SUITE = "bookworm"
DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"
MIRROR_ENV = "GPUPROV_DEBIAN_MIRROR"
DEBOOTSTRAP_ATTEMPTS = 3

BASE_PACKAGES: tuple[str, ...] = (
    "systemd", "systemd-sysv", "dbus", "openssh-server", "sudo", "python3", "python3-apt", "python3-venv",
    "iproute2", "procps", "ca-certificates", "gnupg", "kmod", "curl", "less",
    # ansible.builtin.deb822_repository (nvidia_driver's apt entry) imports python3-debian; the nodes
    # cannot reach Debian's archive for the role to install it, as it does on real hosts.
    "python3-debian",
)  # fmt: skip
RPM_PACKAGES: tuple[str, ...] = ("dnf", "python3-dnf", "rpm", "python3-rpm")

USER = "gpuprov"
USER_UID = 1000

# Units that fail, or only get in the way, in a container. The apt and dpkg timers would take the dpkg lock
# in the middle of a test run.
MASKED_UNITS: tuple[str, ...] = (
    "getty@tty1.service", "console-getty.service", "apt-daily.timer", "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer", "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer",
)  # fmt: skip

SSHD_DROP_IN = """\
# gpuprov sandbox host: keys only, one host key (injected per sandbox), no DNS round trip per login.
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
HostKey /etc/ssh/ssh_host_ed25519_key
UseDNS no
"""

# The sandbox injects a host key with `docker cp` before the container starts; a container started without
# one makes its own instead of leaving ssh.service failed.
SSH_SERVICE_DROP_IN = """\
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c 'test -s /etc/ssh/ssh_host_ed25519_key || \
ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key'
ExecStartPre=/usr/sbin/sshd -t
"""

SUDOERS = f"{USER} ALL=(ALL:ALL) NOPASSWD: ALL\n"

# Docker mounts /proc/sys read-only. The container has its own network namespace, whose sysctls (e.g.
# net.ipv4.tcp_rmem) are its own, so the node makes /proc/sys/net writable at boot, as on a real host.
# Keys the kernel keeps global or read-only in a network namespace (vm.*, net.core.rmem_max,
# net.core.netdev_max_backlog ...) stay unsettable, and roles must be told to tolerate them.
NET_SYSCTL_UNIT_NAME = "gpuprov-sandbox-net-sysctl.service"
NET_SYSCTL_UNIT = """\
[Unit]
Description=gpuprov sandbox: make this container's network namespace sysctls writable
DefaultDependencies=no
Before=sysinit.target systemd-sysctl.service
ConditionPathIsReadWrite=!/proc/sys/net

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/mount --bind /proc/sys/net /proc/sys/net
ExecStart=/bin/mount -o remount,bind,rw /proc/sys/net

[Install]
WantedBy=sysinit.target
"""

# Rocky 9's own /etc/dnf/dnf.conf. Repositories come from the sandbox mirror only.
DNF_CONF = """\
[main]
gpgcheck=1
installonly_limit=3
clean_requirements_on_remove=True
best=True
skip_if_unavailable=False
"""


@dataclass(frozen=True)
class OsSpec:
    """How one sandbox OS differs from the Debian 12 base rootfs."""

    name: str
    kind: str  # "debian", "ubuntu-like" or "rocky-like"; only for messages and docs
    extra_packages: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # (absolute path in the image, content)
    symlinks: tuple[tuple[str, str], ...] = ()  # (absolute path in the image, target)
    removed: tuple[str, ...] = ()  # absolute paths deleted from the image
    rpm_database: bool = False  # initialise an empty rpm database at /var/lib/rpm


def _ubuntu_like(version: str, codename: str, nickname: str) -> OsSpec:
    """An Ubuntu LTS stand-in; `version` is the point release, e.g. "22.04.4"."""
    release = version.rsplit(".", 1)[0] if version.count(".") == 2 else version
    pretty = f"Ubuntu {version} LTS"
    os_release = (
        f'PRETTY_NAME="{pretty}"\n'
        'NAME="Ubuntu"\n'
        f'VERSION_ID="{release}"\n'
        f'VERSION="{version} LTS ({nickname})"\n'
        f"VERSION_CODENAME={codename}\n"
        "ID=ubuntu\n"
        "ID_LIKE=debian\n"
        'HOME_URL="https://www.ubuntu.com/"\n'
        'SUPPORT_URL="https://help.ubuntu.com/"\n'
        'BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"\n'
        'PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"\n'
        f"UBUNTU_CODENAME={codename}\n"
    )
    lsb_release = (
        "DISTRIB_ID=Ubuntu\n"
        f"DISTRIB_RELEASE={release}\n"
        f"DISTRIB_CODENAME={codename}\n"
        f'DISTRIB_DESCRIPTION="{pretty}"\n'
    )
    return OsSpec(
        name=f"ubuntu{release}",
        kind="ubuntu-like",
        # netbase: /etc/protocols and /etc/services, which every real server has (minbase leaves them out).
        # ufw: Ubuntu's own firewall, installed (inactive) on every Ubuntu server.
        extra_packages=("netbase", "ufw"),
        files=(
            ("/usr/lib/os-release", os_release),
            ("/etc/lsb-release", lsb_release),
            ("/etc/issue", f"{pretty} \\n \\l\n\n"),
            ("/etc/issue.net", f"{pretty}\n"),
            ("/etc/debian_version", "bookworm/sid\n"),  # what Ubuntu 22.04 ships
        ),
        symlinks=(("/etc/os-release", "../usr/lib/os-release"),),
    )


def _rocky_like(version: str, nickname: str, support_end: str) -> OsSpec:
    """A Rocky Linux stand-in; `version` is the minor release, e.g. "9.4"."""
    major = version.split(".")[0]
    os_release = (
        'NAME="Rocky Linux"\n'
        f'VERSION="{version} ({nickname})"\n'
        'ID="rocky"\n'
        'ID_LIKE="rhel centos fedora"\n'
        f'VERSION_ID="{version}"\n'
        f'PLATFORM_ID="platform:el{major}"\n'
        f'PRETTY_NAME="Rocky Linux {version} ({nickname})"\n'
        'ANSI_COLOR="0;32"\n'
        'LOGO="fedora-logo-icon"\n'
        f'CPE_NAME="cpe:/o:rocky:rocky:{major}::baseos"\n'
        'HOME_URL="https://rockylinux.org/"\n'
        'BUG_REPORT_URL="https://bugs.rockylinux.org/"\n'
        f'SUPPORT_END="{support_end}"\n'
        f'ROCKY_SUPPORT_PRODUCT="Rocky-Linux-{major}"\n'
        f'ROCKY_SUPPORT_PRODUCT_VERSION="{version}"\n'
        'REDHAT_SUPPORT_PRODUCT="Rocky Linux"\n'
        f'REDHAT_SUPPORT_PRODUCT_VERSION="{version}"\n'
    )
    return OsSpec(
        name=f"rocky{major}",
        kind="rocky-like",
        # Rocky's firewall, enabled on every Rocky server; Debian's build here (the rpm database is empty).
        # dnf-plugins-core for versionlock, which Rocky ships as python3-dnf-plugin-versionlock.
        extra_packages=(*RPM_PACKAGES, "dnf-plugins-core", "netbase", "firewalld"),
        files=(
            ("/usr/lib/os-release", os_release),
            ("/etc/rocky-release", f"Rocky Linux release {version} ({nickname})\n"),
            ("/etc/system-release-cpe", f"cpe:/o:rocky:rocky:{major}::baseos\n"),
            ("/etc/dnf/dnf.conf", DNF_CONF),
            # dnf reads $releasever from the rpm database, which starts empty here; real Rocky says "9".
            ("/etc/dnf/vars/releasever", f"{major}\n"),
            # Debian's rpm keeps its database in ~/.rpmdb; Rocky's is system-wide.
            ("/etc/rpm/macros.dbpath", "%_dbpath /var/lib/rpm\n"),
            # Rocky's dynamic linker searches /usr/lib64, where its packages put libraries; Debian's does not.
            ("/etc/ld.so.conf.d/gpuprov-standin-lib64.conf", "/usr/lib64\n"),
        ),
        symlinks=(
            ("/etc/os-release", "../usr/lib/os-release"),
            ("/etc/redhat-release", "rocky-release"),
            ("/etc/system-release", "rocky-release"),
        ),
        removed=("/etc/debian_version",),
        rpm_database=True,
    )


# One row per supported OS; more Ubuntu or Rocky releases are one line each.
_OSES: dict[str, OsSpec] = {
    spec.name: spec
    for spec in (
        # Debian installs no firewall by default; the sandbox's Debian hosts have ufw, as many admins add.
        OsSpec(name="debian12", kind="debian", extra_packages=("netbase", "ufw")),
        _ubuntu_like("22.04.4", "jammy", "Jammy Jellyfish"),
        _rocky_like("9.4", "Blue Onyx", "2032-05-31"),
    )
}
SANDBOX_OSES: tuple[str, ...] = tuple(_OSES)


# ---------------------------------------------------------------------------------------------------------
# Public interface


def ensure_image(os_name: str) -> str:
    """Return a local image ref (e.g. 'gpuprov/node:debian12-<12 hex>') for os_name, building it only when no
    image with that content hash exists. Raises gpuprov.errors.BadInput for an unknown os_name."""
    spec = os_spec(os_name)
    ref = image_ref(os_name)
    docker.ensure_engine()
    if docker.image_exists(ref):
        return ref
    with _build_lock():
        if not docker.image_exists(ref):  # another gpuprov may have built it while we waited
            _build_image(spec, ref)
    return ref


def os_spec(os_name: str) -> OsSpec:
    try:
        return _OSES[os_name]
    except KeyError:
        raise BadInput(f"unknown sandbox OS {os_name!r}; supported: {', '.join(SANDBOX_OSES)}") from None


def image_ref(os_name: str) -> str:
    spec = os_spec(os_name)
    return f"{IMAGE_REPOSITORY}:{spec.name}-{image_hash(spec)}"


# ---------------------------------------------------------------------------------------------------------
# Content hashes


def _digest(*parts: object) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def base_hash() -> str:
    """Identifies the debootstrapped rootfs; independent of the per-OS steps, so it survives their edits."""
    return _digest("base", RECIPE_VERSION, DEBIAN_SUITE, "minbase", BASE_PACKAGES)


@functools.cache
def _recipe_source() -> str:
    return Path(__file__).read_text()


def image_hash(spec: OsSpec) -> str:
    """Identifies an image: the base rootfs, what this OS changes, and the build steps (this file)."""
    return _digest("image", RECIPE_VERSION, base_hash(), dataclasses.asdict(spec), _recipe_source())


# ---------------------------------------------------------------------------------------------------------
# The Debian mirror


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror to debootstrap from: $GPUPROV_DEBIAN_MIRROR, else the one this machine's apt uses."""
    override = os.environ.get(MIRROR_ENV, "").strip()
    if override:
        return override.rstrip("/")
    return find_apt_mirror(apt_dir, DEBIAN_SUITE) or DEFAULT_DEBIAN_MIRROR


def find_apt_mirror(apt_dir: Path, suite: str) -> str | None:
    """The first URI in apt's sources (both formats) that serves `suite` with component main, or None."""
    for path in _apt_source_files(apt_dir):
        parse = _parse_deb822 if path.suffix == ".sources" else _parse_one_line
        for uris, suites, components in parse(path.read_text()):
            if suite in suites and "main" in components:
                usable = [u for u in uris if u.startswith(("http://", "https://", "file:/"))]
                if usable:
                    return usable[0].rstrip("/")
    return None


def _apt_source_files(apt_dir: Path) -> list[Path]:
    parts = apt_dir / "sources.list.d"
    files = [apt_dir / "sources.list"]
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    return [f for f in files if f.is_file()]


_Entry = tuple[list[str], list[str], list[str]]  # URIs, suites, components


def _parse_one_line(text: str) -> list[_Entry]:
    """`deb [option=value ...] URI SUITE COMPONENT...` lines."""
    entries: list[_Entry] = []
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):  # options, which may span several words
            while words and not words[0].endswith("]"):
                words = words[1:]
            words = words[1:]
        if len(words) >= 3:
            entries.append(([words[0]], [words[1]], words[2:]))
    return entries


def _parse_deb822(text: str) -> list[_Entry]:
    """Stanzas of `Types:`, `URIs:`, `Suites:`, `Components:` fields, separated by blank lines."""
    entries: list[_Entry] = []
    for stanza in _deb822_stanzas(text):
        if stanza.get("enabled", "yes").lower() == "no" or "deb" not in stanza.get("types", "").split():
            continue
        uris, suites, components = (
            stanza.get(field, "").split() for field in ("uris", "suites", "components")
        )
        entries.append((uris, suites, components))
    return entries


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    name = ""
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                stanzas.append(fields)
            fields, name = {}, ""
        elif line[0] in " \t":  # continuation of a multi-line field, e.g. an inline Signed-By key
            if name:
                fields[name] += "\n" + line.strip()
        elif ":" in line:
            name, value = line.split(":", 1)
            name = name.strip().lower()
            fields[name] = value.strip()
    return stanzas


# ---------------------------------------------------------------------------------------------------------
# Building


def rootfs_cache_dir() -> Path:
    return paths.cache_dir() / "rootfs"


def base_tarball() -> Path:
    return rootfs_cache_dir() / f"debian-{DEBIAN_SUITE}-{base_hash()}.tar"


def build_log(os_name: str) -> Path:
    return paths.cache_dir() / "logs" / f"image-{os_name}.log"


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One image build at a time on this machine, so parallel callers share one debootstrap."""
    lock_path = paths.cache_dir() / "images.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_image(spec: OsSpec, ref: str) -> None:
    _check_build_host()
    started = time.monotonic()
    cached = base_tarball().is_file()
    estimate = "about 30 s" if cached else "about a minute"
    console.step(f"Building sandbox image {spec.name} (first time only, {estimate})")
    log_path = build_log(spec.name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log, _scratch_dir() as work:
        rootfs = work / "rootfs"
        if cached:
            _unpack(base_tarball(), rootfs, log, log_path)
        else:
            _debootstrap(rootfs, log, log_path)
            _save_base_tarball(rootfs, log, log_path)
        _customise(rootfs, spec, log, log_path)
        _import(rootfs, spec, ref, log)
    _remove_stale_images(spec.name, ref)
    console.success(f"Built sandbox image {ref} in {time.monotonic() - started:.0f} s")


def _check_build_host() -> None:
    if os.geteuid() != 0:
        raise EnvironmentProblem("building sandbox images needs root (debootstrap and chroot); run as root")
    hosttools.ensure({"debootstrap": "debootstrap"}, "building sandbox images")


@contextlib.contextmanager
def _scratch_dir() -> Iterator[Path]:
    """A build directory that is gone afterwards, also after a failure or Ctrl-C."""
    work = Path(tempfile.mkdtemp(prefix="gpuprov-image-"))
    try:
        yield work
    finally:
        _unmount_below(work)  # a killed debootstrap can leave /proc and /sys mounted in the rootfs
        shutil.rmtree(work, ignore_errors=True)


def _unmount_below(path: Path) -> None:
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/mountinfo") as mountinfo:
        points = [line.split()[4] for line in mountinfo]
    for point in sorted((p for p in points if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def _run(cmd: list[str], log: IO[str], log_path: Path) -> None:
    """Run a build command with its output in the log; a failure names the command and the log."""
    if _run_logged(cmd, log) != 0:
        raise GpuprovError(f"building a sandbox image failed at '{' '.join(cmd)}'; see {log_path}")


def _run_logged(cmd: list[str], log: IO[str], env: dict[str, str] | None = None) -> int:
    console.detail("$ " + " ".join(cmd))
    log.write(f"\n$ {' '.join(cmd)}\n")
    log.flush()
    # A process group of its own, so that on Ctrl-C or an error all of it (debootstrap's dpkg in the
    # chroot, say) is stopped before the build directory is removed.
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        return proc.wait()
    except BaseException:
        _stop_group(proc)
        raise


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _build_env() -> dict[str, str]:
    # The build host's environment (locale, virtualenv) has no business inside the rootfs; proxies do.
    proxies = {name: value for name, value in os.environ.items() if name.lower().endswith("_proxy")}
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LC_ALL": "C",
        "DEBIAN_FRONTEND": "noninteractive",
        **proxies,
    }


def _chroot(rootfs: Path, cmd: list[str], log: IO[str], log_path: Path) -> None:
    full = ["chroot", str(rootfs), *cmd]
    if _run_logged(full, log, env=_build_env()) != 0:
        raise GpuprovError(
            f"building a sandbox image failed at '{' '.join(cmd)}' (in the rootfs); see {log_path}"
        )


def _debootstrap(rootfs: Path, log: IO[str], log_path: Path) -> None:
    mirror = debian_mirror()
    cmd = [
        "debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
        DEBIAN_SUITE, str(rootfs), mirror,
    ]  # fmt: skip
    console.detail(f"Downloading Debian {DEBIAN_SUITE} from {mirror}")
    for attempt in range(1, DEBOOTSTRAP_ATTEMPTS + 1):
        _empty_dir(rootfs)  # debootstrap does not resume a half-made rootfs
        if _run_logged(cmd, log, env=_build_env()) == 0:
            return
        if attempt < DEBOOTSTRAP_ATTEMPTS:
            console.warning(f"debootstrap failed (attempt {attempt} of {DEBOOTSTRAP_ATTEMPTS}); trying again")
    raise EnvironmentProblem(
        f"debootstrap could not install Debian {DEBIAN_SUITE} from {mirror} in {DEBOOTSTRAP_ATTEMPTS} "
        f"attempts ({_last_error(log_path)}); see {log_path}. "
        f"Set {MIRROR_ENV} to a Debian mirror this machine can reach"
    )


def _last_error(log_path: Path) -> str:
    """debootstrap's last `E:` line, which usually says what it could not fetch."""
    errors = [line for line in log_path.read_text(errors="replace").splitlines() if line.startswith("E: ")]
    return errors[-1].removeprefix("E: ") if errors else "no error message"


def _empty_dir(path: Path) -> None:
    if path.exists():
        _unmount_below(path)
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _save_base_tarball(rootfs: Path, log: IO[str], log_path: Path) -> None:
    """Keep the fresh rootfs so the other OSes (and later rebuilds) skip debootstrap."""
    target = base_tarball()
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(".*.tmp"):  # left by a build that was killed
        stale.unlink(missing_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."], log, log_path)
        os.replace(partial, target)  # atomic: the cache holds whole tarballs or nothing
    finally:
        partial.unlink(missing_ok=True)
    for old in target.parent.glob(f"debian-{DEBIAN_SUITE}-*.tar"):
        if old != target:
            old.unlink(missing_ok=True)


def _unpack(tarball: Path, rootfs: Path, log: IO[str], log_path: Path) -> None:
    rootfs.mkdir(parents=True)
    _run(["tar", "-C", str(rootfs), "--numeric-owner", "-xpf", str(tarball)], log, log_path)


def _customise(rootfs: Path, spec: OsSpec, log: IO[str], log_path: Path) -> None:
    """Turn the plain Debian rootfs into a sandbox host for `spec`, in the order the steps depend on."""
    if spec.extra_packages:
        _install_packages(rootfs, spec.extra_packages, log, log_path)
    _write_os_files(rootfs, spec)
    if spec.rpm_database:
        _init_rpm_database(rootfs, log, log_path)
    _add_user(rootfs, log, log_path)
    _configure_sshd(rootfs)
    _configure_systemd(rootfs, log, log_path)
    _strip_build_state(rootfs)


def _install_packages(rootfs: Path, packages: tuple[str, ...], log: IO[str], log_path: Path) -> None:
    mirror = debian_mirror()
    # The cached rootfs may come from another mirror setting or network; use the current ones.
    _write(rootfs, "/etc/apt/sources.list", f"deb {mirror} {DEBIAN_SUITE} main\n")
    _write(rootfs, "/etc/resolv.conf", Path("/etc/resolv.conf").read_text())
    apt = ["apt-get", "-q", "-o", "Acquire::Retries=3"]
    for cmd in ([*apt, "update"], [*apt, "install", "-y", "--no-install-recommends", *packages]):
        if _run_logged(["chroot", str(rootfs), *cmd], log, env=_build_env()) != 0:
            raise EnvironmentProblem(
                f"could not install {' '.join(packages)} from {mirror} into a sandbox image; see {log_path}. "
                f"Set {MIRROR_ENV} to a Debian mirror this machine can reach"
            )


def _write_os_files(rootfs: Path, spec: OsSpec) -> None:
    for path, content in spec.files:
        _write(rootfs, path, content)
    for path, target in spec.symlinks:
        link = _inside(rootfs, path)
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    for path in spec.removed:
        _inside(rootfs, path).unlink(missing_ok=True)


def _init_rpm_database(rootfs: Path, log: IO[str], log_path: Path) -> None:
    # dnf needs a database to read even when no package is installed; its repositories come from the mirror.
    _chroot(rootfs, ["rpm", "--initdb"], log, log_path)
    _inside(rootfs, "/etc/yum.repos.d").mkdir(exist_ok=True)
    # Only versionlock, as on Rocky: Debian's dnf-plugins-core also enables `local`, whose unreadable
    # _dnf_local repository makes every dnf run fail with skip_if_unavailable=False.
    for conf in _inside(rootfs, "/etc/dnf/plugins").glob("*.conf"):
        if conf.name != "versionlock.conf":
            conf.write_text(re.sub(r"(?m)^enabled\s*=.*$", "enabled=0", conf.read_text()))
    _chroot(rootfs, ["ldconfig"], log, log_path)


def _add_user(rootfs: Path, log: IO[str], log_path: Path) -> None:
    # Password "*": no password login, but not a locked account, which sshd would refuse even for keys.
    _chroot(
        rootfs,
        ["useradd", "--uid", str(USER_UID), "--user-group", "--create-home", "--shell", "/bin/bash",
         "--password", "*", USER],
        log, log_path,
    )  # fmt: skip
    ssh_dir = _inside(rootfs, f"/home/{USER}/.ssh")
    ssh_dir.mkdir(mode=0o700)
    os.chown(ssh_dir, USER_UID, USER_UID)
    sudoers = _write(rootfs, f"/etc/sudoers.d/{USER}", SUDOERS, mode=0o440)
    _chroot(rootfs, ["visudo", "-cf", f"/{sudoers.relative_to(rootfs)}"], log, log_path)


def _configure_sshd(rootfs: Path) -> None:
    _write(rootfs, "/etc/ssh/sshd_config.d/gpuprov.conf", SSHD_DROP_IN)
    _write(rootfs, "/etc/systemd/system/ssh.service.d/gpuprov-host-key.conf", SSH_SERVICE_DROP_IN)
    # Keys made at build time would be shared by every sandbox host ever started from the image.
    for key in _inside(rootfs, "/etc/ssh").glob("ssh_host_*"):
        key.unlink()


def _configure_systemd(rootfs: Path, log: IO[str], log_path: Path) -> None:
    _chroot(rootfs, ["systemctl", "enable", "ssh.service"], log, log_path)
    _write(rootfs, f"/etc/systemd/system/{NET_SYSCTL_UNIT_NAME}", NET_SYSCTL_UNIT)
    _chroot(rootfs, ["systemctl", "enable", NET_SYSCTL_UNIT_NAME], log, log_path)
    _chroot(rootfs, ["systemctl", "mask", *MASKED_UNITS], log, log_path)
    # An empty machine-id makes systemd generate one per container; dbus reads the same file.
    _write(rootfs, "/etc/machine-id", "", mode=0o444)
    dbus_id = _inside(rootfs, "/var/lib/dbus/machine-id")
    dbus_id.unlink(missing_ok=True)
    dbus_id.symlink_to("/etc/machine-id")


def _strip_build_state(rootfs: Path) -> None:
    # Test hosts cannot reach Debian's archive; the sandbox mirror writes their sources.
    _write(rootfs, "/etc/apt/sources.list", "")
    for entry in _inside(rootfs, "/etc/apt/sources.list.d").iterdir():
        entry.unlink()
    for cached in ("/var/lib/apt/lists", "/var/cache/apt"):
        for entry in _inside(rootfs, cached).glob("**/*"):
            if entry.is_file() and entry.name != "lock":
                entry.unlink()
    _write(rootfs, "/etc/resolv.conf", "")  # Docker mounts its own; this one is the build host's


def _inside(rootfs: Path, path: str) -> Path:
    return rootfs / path.lstrip("/")


def _write(rootfs: Path, path: str, content: str, mode: int = 0o644) -> Path:
    target = _inside(rootfs, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():  # e.g. Debian's /etc/os-release; never write through a link out of the rootfs
        target.unlink()
    target.write_text(content)
    target.chmod(mode)
    return target


def _import(rootfs: Path, spec: OsSpec, ref: str, log: IO[str]) -> None:
    changes = [
        'CMD ["/sbin/init"]',
        "ENV container=docker",  # how systemd knows it runs in a container
        f'LABEL {LABEL_OS}="{spec.name}" {LABEL_HASH}="{image_hash(spec)}"',
    ]
    cmd = ["docker", "import", *(arg for c in changes for arg in ("--change", c)),
           "--message", f"gpuprov sandbox host {spec.name} ({spec.kind})", "-", ref]  # fmt: skip
    console.detail("$ tar -C ROOTFS -c . | " + " ".join(cmd))
    log.flush()
    tar = subprocess.Popen(
        ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE, stderr=log
    )
    assert tar.stdout is not None
    try:
        imported = subprocess.run(cmd, stdin=tar.stdout, capture_output=True, text=True, check=False)
    finally:
        tar.stdout.close()  # so that tar gets SIGPIPE if docker import died
        tar.wait()
    if imported.returncode != 0 or tar.returncode != 0:
        why = (imported.stderr.strip() or f"tar exited with {tar.returncode}").splitlines()[-1]
        raise docker.DockerError(f"'docker import' of sandbox image {ref} failed: {why}")


def _remove_stale_images(os_name: str, keep: str) -> None:
    """Drop older builds of this OS; images that containers still use stay (docker refuses to remove them)."""
    same_os = f"label={LABEL_OS}={os_name}"
    listed = docker.run(
        "image", "ls", "--filter", same_os, "--format", "{{.Repository}}:{{.Tag}}", check=False
    )
    for ref in listed.stdout.split():
        if ref != keep and ref.startswith(f"{IMAGE_REPOSITORY}:"):
            docker.run("image", "rm", ref, check=False)
