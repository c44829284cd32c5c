"""What `gpuprov bootstrap`'s drift check runs on each host, as root: reads, never changes.

Sent as the text of `python3 -c` (gpuprov.bootstrap.drift_probe). It reads every role's manifest under
/var/lib/gpuprov/managed/ (written by the role's last task: docs/developers/adding-a-role.md) and prints one
JSON object: a digest of every item each manifest names, and the host's identity. No file content leaves the
host, only digests.

    {"identity": {...}, "roles": {"nccl": {"items": {"files /etc/nccl.conf": "sha256:... 644 0 0"}}},
     "package_manager": "dpkg"}

A manifest this program cannot read exactly (bad JSON, another schema, a key it does not know, a value that
is not a list of strings) is {"error": "..."} for its role: the controller then runs everything on the host.
A tool that fails (systemctl without systemd, a dpkg-query that answers for a name it was not asked) is an
error the same way: a doubt is never read as "no drift".

Python 3.6 parses and runs it (EL8's /usr/bin/python3): no dataclasses, no subprocess capture_output.
"""

import glob
import hashlib
import hmac
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from typing import Any, Dict, List, Optional, Set, Tuple

MANAGED_DIR = "/var/lib/gpuprov/managed"
SCHEMA = 1
KINDS = ("files", "listings", "packages", "services", "sysctl", "modules")
KNOWN_KEYS = set(KINDS) | {"schema", "role", "firewall"}
TOOL_TIMEOUT_S = 60
GLOB_CHARS = re.compile(r"[*?\[]")
# os-release IDs (ID and ID_LIKE) whose package manager is rpm; the others that the roles support use dpkg.
RPM_IDS = {"rhel", "centos", "fedora", "rocky", "almalinux"}


class ProbeError(Exception):
    """A tool's answer this program cannot read for sure."""


def run(argv: List[str], stdin: Optional[str] = None) -> Tuple[int, str, str]:
    """(rc, stdout, stderr) of a command, in the C locale (tools' messages are parsed)."""
    env = dict(os.environ, LC_ALL="C", LANG="C", SYSTEMD_PAGER="", PAGER="cat")
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            universal_newlines=True,
        )  # fmt: skip
    except OSError as exc:
        raise ProbeError(f"{argv[0]}: {exc}") from exc
    try:
        out, err = proc.communicate(stdin, timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise ProbeError(f"{argv[0]} did not answer within {TOOL_TIMEOUT_S} s") from exc
    return proc.returncode, out, err


def file_digest(path: str) -> str:
    """sha256 of the content, mode, owner uid and gid; a link's target; a folder's mode and owner; absent."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    if os.path.islink(path):
        return "link:" + os.readlink(path)
    owner = f"{info.st_mode & 0o7777:o} {info.st_uid} {info.st_gid}"
    if os.path.isdir(path):
        return "dir " + owner
    if not stat.S_ISREG(info.st_mode):  # a FIFO left in a user's folder would block root's read forever
        return f"not a regular file ({stat.S_IFMT(info.st_mode):o}) {owner}"
    digest = hashlib.sha256()
    # O_NONBLOCK and O_NOFOLLOW: a path swapped for a FIFO or a link after the lstat above is not waited on
    # or followed (the read fails, and a failed probe is a full run).
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return f"not a regular file {owner}"
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()} {owner}"


def file_items(pattern: str) -> Dict[str, str]:
    """{"files PATH": digest} for each path the pattern names (expanded when it has glob characters)."""
    if not GLOB_CHARS.search(pattern):
        return {"files " + pattern: file_digest(pattern)}
    matches = sorted(glob.glob(pattern))
    if not matches:
        return {"files " + pattern: "absent"}
    return {"files " + path: file_digest(path) for path in matches}


def listing_digest(pattern: str) -> str:
    names = sorted(glob.glob(pattern))
    return "{} names sha256:{}".format(len(names), hashlib.sha256("\n".join(names).encode()).hexdigest())


def sysctl_value(key: str) -> str:
    path = "/proc/sys/" + (key if "/" in key else key.replace(".", "/"))
    try:
        with open(path) as handle:
            return " ".join(handle.read().split())
    except FileNotFoundError:
        return "absent"


def loaded_modules() -> Set[str]:
    """The loaded modules' names; none on a kernel without module support (no /proc/modules, proc(5)):
    there /sys/module/M tells whether M is there at all (module_state's "builtin")."""
    try:
        with open("/proc/modules") as handle:
            return {line.split()[0] for line in handle if line.strip()}
    except FileNotFoundError:
        return set()


def module_state(name: str, loaded: Set[str]) -> str:
    """loaded (with /sys/module/M/version when the module has one), builtin, or not loaded."""
    plain = name.replace("-", "_")  # the kernel lists modules with underscores
    version = ""
    try:
        with open(f"/sys/module/{plain}/version") as handle:
            version = " " + handle.read().strip()
    except OSError:
        pass
    if plain in loaded:
        return "loaded" + version
    return "builtin" + version if os.path.isdir("/sys/module/" + plain) else "not loaded"


def os_release() -> Dict[str, str]:
    fields = {}
    try:
        with open("/etc/os-release") as handle:
            for line in handle:
                key, sep, value = line.strip().partition("=")
                if sep:
                    fields[key] = value.strip().strip("\"'")
    except OSError:
        pass
    return fields


def package_manager(fields: Dict[str, str]) -> str:
    ids = {fields.get("ID", "")} | set(fields.get("ID_LIKE", "").split())
    return "rpm" if ids & RPM_IDS else "dpkg"


def parse_dpkg_query(names: List[str], rc: int, out: str, err: str) -> Dict[str, str]:
    """{name: "VERSION STATUS[; ...]"} from `dpkg-query -W -f '${Package}\\t${Architecture}\\t${Version}\\t
    ${Status}\\n' NAMES`; "absent" for a name it says it has no package for (rc 1)."""
    found: Dict[str, List[str]] = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) != 4:
            raise ProbeError(f"dpkg-query printed a line this probe cannot read: {line[:200]!r}")
        found.setdefault(parts[0], []).append(f"{parts[1]} {parts[2]} {parts[3]}")
    missing = set(re.findall(r"^dpkg-query: no packages found matching (\S+)$", err, re.MULTILINE))
    if rc not in (0, 1) or (rc == 1 and not missing):
        raise ProbeError(f"dpkg-query failed (exit {rc}): {err.strip()[:200]}")
    return answers(names, found, missing, "dpkg-query gave no answer for")


def answers(names: List[str], found: Dict[str, List[str]], missing: Set[str], unsure: str) -> Dict[str, str]:
    """Each name's lines joined, "absent" for a name the tool said it lacks; ProbeError for any other."""
    result = {}
    for name in names:
        if name in found:
            result[name] = "; ".join(sorted(found[name]))
        elif name in missing:
            result[name] = "absent"
        else:
            raise ProbeError(f"{unsure} {name}")
    return result


def parse_rpm_query(names: List[str], rc: int, out: str) -> Dict[str, str]:
    """{name: "EPOCH:VERSION-RELEASE.ARCH[; ...]"} from `rpm -q --qf '%{NAME}\\t%{EPOCH}:...\\n' NAMES`;
    "absent" for "package NAME is not installed" (rpm's exit status counts those)."""
    found: Dict[str, List[str]] = {}
    missing: Set[str] = set()
    for line in out.splitlines():
        match = re.match(r"^package (\S+) is not installed$", line)
        if match:
            missing.add(match.group(1))
            continue
        name, sep, value = line.partition("\t")
        if not sep:
            raise ProbeError(f"rpm printed a line this probe cannot read: {line[:200]!r}")
        found.setdefault(name, []).append(value)
    if rc != len(missing):
        raise ProbeError(f"rpm -q failed (exit {rc}) for reasons besides packages not installed")
    # no line and no "not installed": rpm -q matched it by another NAME (a NEVRA given), so unsure whose
    return answers(names, found, missing, "rpm -q gave no line named")


def package_states(names: List[str], manager: str) -> Dict[str, str]:
    if not names:
        return {}
    if manager == "rpm":
        fmt = "%{NAME}\t%{EPOCH}:%{VERSION}-%{RELEASE}.%{ARCH}\n"
        rc, out, _ = run(["rpm", "-q", "--qf", fmt, *names])
        return parse_rpm_query(names, rc, out)
    fmt = "${Package}\t${Architecture}\t${Version}\t${Status}\n"
    rc, out, err = run(["dpkg-query", "-W", "-f", fmt, *names])
    return parse_dpkg_query(names, rc, out, err)


def parse_systemctl_show(units: List[str], rc: int, out: str) -> Dict[str, str]:
    """{unit: "UNITFILESTATE ACTIVESTATE"} from `systemctl show -p Id -p UnitFileState -p ActiveState UNITS`:
    one block of KEY=VALUE lines per unit, in the order given, blank lines between."""
    if rc != 0:
        raise ProbeError(f"systemctl show failed (exit {rc})")
    blocks = [block for block in re.split(r"\n\s*\n", out.strip()) if block.strip()]
    if len(blocks) != len(units):
        raise ProbeError(f"systemctl show answered {len(blocks)} units for {len(units)}")
    result = {}
    for unit, block in zip(units, blocks):
        fields = dict(line.partition("=")[::2] for line in block.splitlines())
        if "ActiveState" not in fields or "UnitFileState" not in fields:
            raise ProbeError(f"systemctl show gave no state for {unit}")
        result[unit] = "{} {}".format(fields["UnitFileState"] or "-", fields["ActiveState"])
    return result


def service_states(units: List[str]) -> Dict[str, str]:
    if not units:
        return {}
    argv = ["systemctl", "show", "--no-pager", "-p", "Id", "-p", "UnitFileState", "-p", "ActiveState"]
    return parse_systemctl_show(units, *run(argv + units)[:2])


# The running firewall's rules as its own tool lists them: ufw's `status verbose` (the rules with their
# comments, the default policies and logging: ufw(8)); firewalld's runtime and permanent configuration of
# every zone, `--list-all-zones` (firewall-cmd(1)). A tool that is not there, or a daemon that is not
# running, is part of the digest too ("not running" is a state the role repairs).
FIREWALL_COMMANDS = (
    ["ufw", "status", "verbose"],
    ["firewall-cmd", "--list-all-zones"],
    ["firewall-cmd", "--permanent", "--list-all-zones"],
)


def firewall_digest() -> str:
    digest = hashlib.sha256()
    for argv in FIREWALL_COMMANDS:
        if shutil.which(argv[0]) is None:
            digest.update(f"{argv[0]}: none\n".encode())
            continue
        rc, out, err = run(argv)
        digest.update("{} {}\n{}\n{}\n".format(" ".join(argv), rc, out, err).encode())
    return "sha256:" + digest.hexdigest()


def read_manifest(path: str, role: str) -> Dict[str, Any]:
    """The manifest's lists, or ProbeError when it is not exactly schema 1."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("role") != role:
        raise ProbeError(f"{path} is not a schema {SCHEMA} manifest of role {role}")
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ProbeError("{} has keys this probe does not know: {}".format(path, ", ".join(unknown)))
    for kind in KINDS:
        values = data.get(kind, [])
        if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
            raise ProbeError(f"{path}: {kind} is not a list of names")
        if any("{{" in v or "{%" in v for v in values):
            raise ProbeError(f"{path}: {kind} has an unrendered template")
    if data.get("firewall", False) not in (True, False):
        raise ProbeError(f"{path}: firewall is not true or false")
    return data


def role_items(manifest: Dict[str, Any], states: Dict[str, Any]) -> Dict[str, str]:
    items = {}
    for pattern in manifest.get("files", []):
        items.update(file_items(pattern))
    for pattern in manifest.get("listings", []):
        items["listings " + pattern] = listing_digest(pattern)
    for name in manifest.get("packages", []):
        items["packages " + name] = states["packages"][name]
    for unit in manifest.get("services", []):
        items["services " + unit] = states["services"][unit]
    for key in manifest.get("sysctl", []):
        items["sysctl " + key] = sysctl_value(key)
    for name in manifest.get("modules", []):
        items["modules " + name] = module_state(name, states["modules"])
    if manifest.get("firewall"):
        items["firewall"] = states["firewall"]
    return items


def identity(fields: Dict[str, str]) -> Dict[str, Any]:
    """What makes a host another host for the record: kernel, OS, machine id, loaded driver, GPU devices."""

    def first_line(path: str) -> str:
        try:
            with open(path) as handle:
                return handle.readline().strip()
        except OSError:
            return ""

    release = "\n".join(f"{k}={fields[k]}" for k in sorted(fields))
    # machine-id(5): the ID is confidential; an application uses a keyed hash of it, its own ID with it.
    machine = hmac.new(first_line("/etc/machine-id").encode(), b"gpuprov drift check", "sha256").hexdigest()
    return {
        "kernel": os.uname().release,
        "os_release": hashlib.sha256(release.encode()).hexdigest(),
        "machine_id": machine,
        "nvidia_driver": first_line("/sys/module/nvidia/version"),
        "nvidia_devices": sorted(glob.glob("/dev/nvidia[0-9]*")),
        # What the cluster-wide roles render from this host's facts into the other hosts' files (slurm.conf's
        # NodeName line: CPUs, RealMemory, NodeAddr; the firewall's peers and mpi's known_hosts: addresses).
        "cpus": os.cpu_count(),
        "memory_kb": meminfo_total_kb(),
        "ipv4": local_ipv4(),
    }


def meminfo_total_kb() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def local_ipv4() -> List[str]:
    """The host's own IPv4 addresses but loopback: /proc/net/fib_trie's "/32 host LOCAL" entries, each after
    the line that names its address (the kernel's local table, which `ip route show table local` lists)."""
    found: Set[str] = set()
    try:
        with open("/proc/net/fib_trie") as handle:
            last = ""
            for line in handle:
                text = line.strip()
                if text.startswith(("|--", "+--")):
                    last = text.split()[1]
                elif text == "/32 host LOCAL" and last and not last.startswith("127."):
                    found.add(last)
    except (OSError, IndexError):
        return []
    return sorted(found)


def collect(managed_dir: str = MANAGED_DIR) -> Dict[str, Any]:
    fields = os_release()
    manager = package_manager(fields)
    manifests = {}
    roles: Dict[str, Any] = {}
    report: Dict[str, Any] = {"identity": identity(fields), "package_manager": manager, "roles": roles}
    names = sorted(os.listdir(managed_dir)) if os.path.isdir(managed_dir) else []
    for name in names:
        if not name.endswith(".json"):
            continue
        role = name[: -len(".json")]
        try:
            manifests[role] = read_manifest(os.path.join(managed_dir, name), role)
        except ProbeError as exc:
            report["roles"][role] = {"error": str(exc)}
    # Each tool once for every role: one dpkg-query, one systemctl, one firewall listing per host.
    states: Dict[str, Any] = {}
    try:
        wanted = {kind: sorted({v for m in manifests.values() for v in m.get(kind, [])}) for kind in KINDS}
        states["packages"] = package_states(wanted["packages"], manager)
        states["services"] = service_states(wanted["services"])
        states["modules"] = loaded_modules() if wanted["modules"] else set()
        states["firewall"] = firewall_digest() if any(m.get("firewall") for m in manifests.values()) else ""
    except (ProbeError, OSError) as exc:
        for role in manifests:
            report["roles"][role] = {"error": str(exc)}
        return report
    for role, manifest in manifests.items():
        try:
            report["roles"][role] = {"items": role_items(manifest, states)}
        except (ProbeError, OSError) as exc:
            report["roles"][role] = {"error": str(exc)}
    return report


def main(argv: List[str]) -> int:
    managed_dir = argv[1] if len(argv) > 1 else MANAGED_DIR
    sys.stdout.write(json.dumps(collect(managed_dir), sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
