"""What `gpuprov check` runs on each host: reads, never changes. Standard library only; Python >= 3.8, and
Python 3.6 parses it and gets one line saying what to set (see MIN_PYTHON and gpuprov.onhost).

Sent as the text of `python3 -c` in the SSH command, like launch's probe.py, with gpuprov/onhost/sockets.py's
code in place of its import (gpuprov.onhost.program); nothing is written to the host.

    hostprobe.py collect          reads a JSON request on stdin, prints one JSON object: everything the
                                  per-host checks need, gathered in this one run (raw tool outputs; the
                                  controller parses them); the request carries the text of env_probe.py
                                  and matmul_probe.py, which it runs with the env's python
    hostprobe.py listen A B N T   binds the first free port of A..B (the rendezvous range) and a port the
                                  kernel picks from ip_local_port_range (where NCCL and gloo listen),
                                  prints `ports R E`, then `got TOKEN` per connection (up to N each) in T s
    hostprobe.py connect T JSON   JSON: [[name, address, port], ...]; prints one JSON object
                                  {name: "ok" or the error}, every target tried at once, T s each
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

from gpuprov.onhost.sockets import accept_tokens, bind_first, send_token

# The oldest Python this program runs on, and Ansible's modules too: ansible-core 2.19 refuses targets
# below 3.8 (`_PY_MIN = (3, 8)` in ansible/module_utils/basic.py; the floor since 2.18). Older ones parse this
# file (EL8's /usr/bin/python3 is 3.6), so they get one line saying what to set instead of a traceback.
MIN_PYTHON = (3, 8)
UNSUPPORTED_PYTHON_RC = 3

TOOL_TIMEOUT_S = 20.0
ENV_PROBE_TIMEOUT_S = 120.0  # the env's `import torch` may take a minute on a cold disk
MATMUL_SIZE = 16384
MATMUL_SECONDS = 4.0
MATMUL_SOAK_S = 30.0  # untimed multiplying first, so a cold GPU's boost does not read high (matmul_probe)
MATMUL_TIMEOUT_S = 150.0  # CUDA's start, the soak, the timed products
# The whole collect's time: nvidia-smi four times (-q, nvlink, topo -m, the ECC query), the env probe and the
# matmul at their limits (350 s),
# and 30 s for the other tools. Every wait is cut to what is left of it, so the program ends on its own and
# says what it did not get to; gpuprov's SSH limit (check/gather.py) is this and a margin.
HOST_BUDGET_S = 4 * TOOL_TIMEOUT_S + ENV_PROBE_TIMEOUT_S + MATMUL_TIMEOUT_S + 30.0
# The request's tool_timeout and budget, where it gives them (tests); the deadline collect sets.
SETTINGS = {"tool_timeout": TOOL_TIMEOUT_S, "deadline": float("inf")}


def _remaining() -> float:
    return SETTINGS["deadline"] - time.monotonic()


def _out_of_time(what: str) -> Dict[str, object]:
    return _skipped(f"check's time on the host ran out before {what} (it had {HOST_BUDGET_S:g} s in all)")


def _run(argv: List[str], timeout: Optional[float] = None, stdin: Optional[str] = None) -> Dict[str, object]:
    """A tool's exit status and output; rc None with `missing` or `timeout` when it did not run.

    The tool runs in a process group of its own: on timeout the whole group is killed (a hung nvidia-smi and
    whatever it started), not left on the host. Output is read as UTF-8 with replacement: one byte of
    another encoding (a Latin-1 line in the kernel log) must not cost the host its checks.
    """
    limit = min(SETTINGS["tool_timeout"] if timeout is None else timeout, _remaining())
    if limit <= 0:
        return _out_of_time(argv[0])
    if shutil.which(argv[0]) is None and not os.path.isabs(argv[0]):
        return {"rc": None, "missing": True, "stdout": "", "stderr": ""}
    if os.path.isabs(argv[0]) and not os.access(argv[0], os.X_OK):
        return {"rc": None, "missing": True, "stdout": "", "stderr": ""}
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ, LC_ALL="C"),
            start_new_session=True,
        )
    except OSError as exc:
        return {"rc": None, "missing": True, "stdout": "", "stderr": str(exc)}
    try:
        out, err = proc.communicate(stdin.encode() if stdin is not None else None, timeout=limit)
    except subprocess.TimeoutExpired:
        _end_group(proc)
        return {"rc": None, "timeout": limit, "stdout": "", "stderr": ""}
    return {"rc": proc.returncode, "stdout": _text(out), "stderr": _text(err)}


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """SIGKILL to the process group the tool leads (start_new_session)."""
    with contextlib.suppress(OSError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)


def _end_group(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Kill the tool's group and reap the tool; a process stuck in the kernel (D state, a hung driver call)
    dies only when that call returns: the probe goes on without waiting for it."""
    _kill_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _read(path: str) -> Optional[str]:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _sysctls(keys: List[str]) -> Dict[str, Optional[str]]:
    return {key: _sysctl(key) for key in keys}


def _sysctl(key: str) -> Optional[str]:
    text = _read("/proc/sys/" + key.replace(".", "/"))
    return " ".join(text.split()) if text is not None else None


def _readonly(keys: List[str]) -> List[str]:
    """The keys nobody can set here: missing (not in this network namespace), mode without write (a global
    key seen from a container's namespace) or on a read-only mount (/proc/sys in a container)."""
    found = []
    for key in keys:
        path = "/proc/sys/" + key.replace(".", "/")
        try:
            writable = bool(os.stat(path).st_mode & 0o200) and not os.statvfs(path).f_flag & os.ST_RDONLY
        except OSError:
            writable = False
        if not writable:
            found.append(key)
    return found


def _interfaces() -> Dict[str, str]:
    """Each network interface and its operstate (up, down, unknown)."""
    found: Dict[str, str] = {}
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return found
    for name in names:
        state = _read(f"/sys/class/net/{name}/operstate")
        found[name] = (state or "unknown").strip()
    return found


def _interface_speeds() -> Dict[str, Optional[int]]:
    """Each network interface's link speed in Mb/s (sysfs; None where it has none: down, virtual)."""
    found: Dict[str, Optional[int]] = {}
    for name in _interfaces():
        text = (_read(f"/sys/class/net/{name}/speed") or "").strip()  # EINVAL (None) on a down link
        found[name] = int(text) if text.lstrip("-").isdigit() and int(text) > 0 else None
    return found


def _nvidia_pci_devices(classes: Tuple[str, ...] = ("0x0300", "0x0302")) -> int:
    """NVIDIA devices on the PCI bus: vendor 0x10de and a class of `classes`; by default GPUs, class 0x0300
    (VGA) or 0x0302 (3D controller); NVSwitches are class 0x0680 (bridge)."""
    count = 0
    try:
        devices = os.listdir("/sys/bus/pci/devices")
    except OSError:
        return 0
    for device in devices:
        vendor = (_read(f"/sys/bus/pci/devices/{device}/vendor") or "").strip()
        klass = (_read(f"/sys/bus/pci/devices/{device}/class") or "").strip()
        if vendor == "0x10de" and klass[:6] in classes:
            count += 1
    return count


def _packages() -> Dict[str, object]:
    """Installed packages of the NVIDIA stack with their versions, and which are held."""
    prefixes = ("nvidia-", "libnvidia-", "libcuda", "cuda-", "libcudnn", "cudnn", "libnccl", "kmod-nvidia")
    if shutil.which("dpkg-query"):
        res = _run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n"])
        installed = {}
        for line in str(res["stdout"]).splitlines():  # status ii or hi: installed (held or not)
            parts = line.split("\t")
            if len(parts) == 3 and parts[0].startswith(prefixes) and parts[2][1:2] == "i":
                installed[parts[0]] = parts[1]
        holds = _run(["apt-mark", "showhold"])
        held = str(holds["stdout"]).split() if holds["rc"] == 0 else None
        return {"manager": "apt", "installed": installed, "held": held}
    if shutil.which("rpm"):
        res = _run(["rpm", "-qa", "--qf", "%{NAME}\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\n"])
        installed = {}
        for line in str(res["stdout"]).splitlines():
            parts = line.split("\t")
            if len(parts) == 2 and parts[0].startswith(prefixes):
                installed[parts[0]] = parts[1]
        locks = _run(["dnf", "-q", "versionlock", "list"])
        held = None
        if locks["rc"] == 0:
            # Lines like `nvidia-driver-3:550.127.08-1.el9.*`: the name is what comes before `-EPOCH:`.
            held = []
            for line in str(locks["stdout"]).splitlines():
                name = line.strip().split(":")[0].rsplit("-", 1)[0]
                if name:
                    held.append(name)
        return {"manager": "dnf", "installed": installed, "held": held}
    return {"manager": None, "installed": {}, "held": None}


def _kernel_log() -> Dict[str, object]:
    """The kernel log's NVRM lines since boot: dmesg, else sudo -n dmesg (dmesg_restrict), else journalctl;
    each line starts with its seconds since boot, which place an Xid against the last check's watermark."""
    journal = ["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"]
    for argv in (["dmesg"], ["sudo", "-n", "dmesg"], journal):
        res = _run(argv)
        # journalctl exits 0 with nothing for a user outside adm/systemd-journal (it shows only the user's
        # own journal, and -q hides its hint), while a kernel log since boot always has lines.
        unreadable = argv is journal and not str(res.get("stdout") or "").strip()
        if res["rc"] == 0 and not unreadable:
            lines = [line for line in str(res["stdout"]).splitlines() if "NVRM" in line]
            return {"rc": 0, "tool": " ".join(argv), "stdout": "\n".join(lines[-500:])}
    failed = "dmesg, sudo -n dmesg and journalctl -k failed (or showed no kernel line)"
    return {"rc": None, "tool": None, "stdout": "", "error": failed}


def _matmul_under_load(python: str, smi: str, code: str) -> Dict[str, object]:
    """The matmul probe's TFLOPS per GPU (code: matmul_probe.py's text), and nvidia-smi -q read while the
    GPUs are busy with it."""
    limit = min(MATMUL_TIMEOUT_S, _remaining())
    if limit <= 0:
        return _out_of_time("the matmul")
    cmd = [python, "-c", code, str(MATMUL_SIZE), str(MATMUL_SECONDS), str(MATMUL_SOAK_S)]
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return {"rc": None, "missing": True, "stdout": "", "stderr": str(exc)}
    # A hung CUDA initialisation must not hold the whole probe: kill the matmul (and what it started) after
    # its limit.
    timer = threading.Timer(limit, _kill_group, [proc])
    timer.start()
    try:
        busy: Dict[str, object] = {"rc": None, "stdout": "", "stderr": "the matmul never started"}
        assert proc.stdout is not None
        if proc.stdout.readline().strip() == "busy":
            busy = _run([smi, "-q"])
        out, err = proc.communicate("read\n")
    finally:
        timed_out = not timer.is_alive()
        timer.cancel()
    if timed_out:
        return {"rc": None, "timeout": round(limit, 1), "stdout": "", "stderr": "", "smi_q_busy": busy}
    return {"rc": proc.returncode, "stdout": out, "stderr": err[-2000:], "smi_q_busy": busy}


def _sees_gpus(env: Dict[str, object]) -> bool:
    """Whether the env probe's torch initialised CUDA and counts a GPU."""
    try:
        info = json.loads(str(env.get("stdout", "")).strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False
    return bool(info.get("cuda_available")) and int(info.get("device_count") or 0) > 0


INFINIBAND_CLASS = "/sys/class/infiniband"
NVLINK5_MARKER = b"SW_MNG"


def _nvlink5_switch_managers() -> Dict[str, object]:
    """InfiniBand devices whose PCI VPD holds SW_MNG: the NVSwitch managers of an NVLink 5 system (HGX
    B200/B300), whose switches have no PCI function (NVIDIA's driver container,
    _assert_nvlink5_system). The kernel makes `vpd` readable by root only (mode 0600): as another user the
    files are read with sudo -n."""
    try:
        names = sorted(os.listdir(INFINIBAND_CLASS))
    except OSError:
        names = []
    managers: List[str] = []
    unreadable: List[str] = []
    for name in names:
        path = os.path.join(INFINIBAND_CLASS, name, "device", "vpd")
        if not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as handle:
                if NVLINK5_MARKER in handle.read():
                    managers.append(name)
        except OSError:
            unreadable.append(name)
    if unreadable:
        paths = [os.path.join(INFINIBAND_CLASS, n, "device", "vpd") for n in unreadable]
        res = _run(["sudo", "-n", "grep", "-l", NVLINK5_MARKER.decode(), *paths])
        # grep -l names the files that match, rc 1 and nothing on stderr when none does; sudo -n refusing
        # exits 1 too, saying why on stderr.
        if res["rc"] == 0 or (res["rc"] == 1 and not str(res["stderr"]).strip()):
            matched = str(res["stdout"]).split()
            managers += [n for n, path in zip(unreadable, paths) if path in matched]
            unreadable = []
    return {"managers": sorted(managers), "unreadable": unreadable}


def _loaded_modules() -> List[str]:
    text = _read("/proc/modules") or ""
    return [line.split(" ", 1)[0] for line in text.splitlines() if line]


def _program(request: Dict[str, object], name: str) -> str:
    """The text of env_probe.py or matmul_probe.py: it comes with the request (gpuprov.onhost)."""
    programs = request.get("programs")
    return str(programs.get(name, "")) if isinstance(programs, dict) else ""


def _skipped(why: str) -> Dict[str, object]:
    return {"rc": None, "skipped": why, "stdout": "", "stderr": ""}


def stuck_in_kernel(name: str, proc_root: str = "/proc") -> List[int]:
    """The pids of processes called `name` in state D (blocked in a kernel call: a hung driver's ioctl),
    from /proc/PID/stat: `PID (COMM) STATE ...`, COMM up to the last `)` since it may hold one."""
    found: List[int] = []
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return found
    for entry in entries:
        text = _read(f"{proc_root}/{entry}/stat") if entry.isdigit() else None
        if not text or "(" not in text or ")" not in text:
            continue
        comm = text[text.find("(") + 1 : text.rfind(")")]
        state = text[text.rfind(")") + 1 :].split()[:1]
        if comm == name and state == ["D"]:
            found.append(int(entry))
    return sorted(found)


def _gpu_probes(request: Dict[str, object], python: str) -> Dict[str, object]:
    """nvidia-smi, the env's torch and the matmul: each hangs in a stuck driver, and a process blocked in
    the kernel cannot be killed; so none is started after one hung (this run's or an earlier one's)."""
    smi = "nvidia-smi"
    stuck = stuck_in_kernel(smi, str(request.get("proc_root") or "/proc"))
    if stuck:
        why = _skipped(
            f"an nvidia-smi of an earlier run (pid {', '.join(map(str, stuck))}) is stuck in the kernel "
            "(state D): the driver is hung; no GPU probe was started"
        )
        return {"smi_q": why, "smi_nvlink": why, "smi_topo": why, "smi_ecc": why, "env": why, "matmul": why}
    smi_q = _run([smi, "-q"])
    if smi_q.get("timeout"):
        why = _skipped("nvidia-smi hung: the GPU probes were not started")
        return {"smi_q": smi_q, "smi_nvlink": dict(smi_q), "smi_topo": dict(smi_q), "env": why, "matmul": why}
    found: Dict[str, object] = {"smi_q": smi_q, "smi_nvlink": _run([smi, "nvlink", "--status"])}
    found["smi_topo"] = _run([smi, "topo", "-m"])  # which GPU pairs NVLink joins: the all-reduce's bar
    ecc_fields = ",".join(str(f) for f in request.get("ecc_fields") or [])  # type: ignore[attr-defined]
    if ecc_fields:  # the ECC counters by their stable names (the controller's parsers.ECC_FIELDS)
        found["smi_ecc"] = _run([smi, "--query-gpu=" + ecc_fields, "--format=csv,noheader,nounits"])
    found["env"] = env = _run([python, "-c", _program(request, "env_probe")], timeout=ENV_PROBE_TIMEOUT_S)
    if _sees_gpus(env):
        found["matmul"] = _matmul_under_load(python, smi, _program(request, "matmul_probe"))
    return found


def collect(request: Dict[str, object]) -> Dict[str, object]:
    """Everything the checks need, within the budget (HOST_BUDGET_S, or the request's `budget`)."""
    started = time.monotonic()
    SETTINGS["tool_timeout"] = float(str(request.get("tool_timeout") or TOOL_TIMEOUT_S))
    SETTINGS["deadline"] = started + float(str(request.get("budget") or HOST_BUDGET_S))
    try:
        data = _collect(request)
    finally:
        SETTINGS["deadline"] = float("inf")  # the budget is this run's only
    data["seconds"] = round(time.monotonic() - started, 3)
    return data


def _collect(request: Dict[str, object]) -> Dict[str, object]:
    fact = _read("/etc/ansible/facts.d/gpuprov_python_env.fact")
    python = str(request.get("python") or "")
    if not python:  # the python_env role's record of the env, else its default place
        try:
            python = str(json.loads(fact or "").get("python") or "")
        except (ValueError, AttributeError):
            python = ""
        python = python or "/opt/gpuprov/envs/train/bin/python"
    keys = [str(k) for k in request.get("sysctl_keys", [])]  # type: ignore[attr-defined]
    data: Dict[str, object] = {
        "kernel": os.uname().release,
        "proc_driver_version": _read("/proc/driver/nvidia/version"),
        "pci_nvidia_gpus": _nvidia_pci_devices(),
        "sysctl": _sysctls(keys),
        "sysctl_readonly": _readonly(keys),
        "nccl_conf": _read(str(request.get("nccl_conf") or "/etc/nccl.conf")),
        "interfaces": _interfaces(),
        "interface_speeds": _interface_speeds(),
        "cuda_version_json": _read(str(request.get("cuda_home") or "/usr/local/cuda") + "/version.json"),
        "python_env_fact": fact,
        "python_path": python,
        "packages": _packages(),
        "infiniband": sorted(os.listdir("/sys/class/infiniband"))
        if os.path.isdir("/sys/class/infiniband")
        else [],
        "kernel_log": _kernel_log(),
        "boot_id": (_read("/proc/sys/kernel/random/boot_id") or "").strip(),
        "pci_nvswitches": _nvidia_pci_devices(("0x0680",)),
        "modules": _loaded_modules(),
    }
    data["ibstat"] = _run(["ibstat"])
    data["dkms"] = _run(["dkms", "status"])
    data["fabricmanager"] = _run(["systemctl", "is-active", "nvidia-fabricmanager"])
    data["nvlink5"] = _nvlink5_switch_managers()
    data["imex"] = _run(["systemctl", "is-active", "nvidia-imex"])
    data.update(_gpu_probes(request, python))
    return data


def listen(first: int, last: int, expected: int, timeout: float) -> None:
    socks = [bind_first(range(first, last + 1)), bind_first([0])]
    if socks[0] is None or socks[1] is None:
        print("busy", flush=True)
        return
    print(f"ports {socks[0].getsockname()[1]} {socks[1].getsockname()[1]}", flush=True)
    deadline = time.monotonic() + timeout
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)

    threads = [threading.Thread(target=accept_tokens, args=(s, expected, deadline, say)) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def connect(timeout: float, targets: List[List[object]]) -> None:
    results: Dict[str, str] = {}

    def one(name: str, address: str, port: int, token: str) -> None:
        results[name] = send_token(address, port, token, timeout)

    threads = [
        threading.Thread(target=one, args=(str(t[0]), str(t[1]), int(str(t[2])), str(t[3]))) for t in targets
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(results), flush=True)


def unsupported_python(version: Tuple[int, ...], executable: str) -> Optional[str]:
    """Why this interpreter cannot run the probe (it is too old), or None; a line for the check's table."""
    if tuple(version[:2]) >= MIN_PYTHON:
        return None
    return (
        "{exe} is Python {found}, older than {need} (gpuprov's host programs and Ansible's modules need "
        "{need}+): set ansible_python_interpreter to a newer one, e.g. on Rocky/RHEL 8 `dnf install "
        "python3.12` and ansible_python_interpreter=/usr/bin/python3.12"
    ).format(
        exe=executable or "python3",
        found=".".join(map(str, version[:3])),
        need=".".join(map(str, MIN_PYTHON)),
    )


def main(argv: List[str]) -> int:
    too_old = unsupported_python(tuple(sys.version_info[:3]), sys.executable)
    if too_old is not None:
        sys.stderr.write(too_old + "\n")
        return UNSUPPORTED_PYTHON_RC
    command, args = (argv[0], argv[1:]) if argv else ("", [])
    if command == "collect" and not args:
        print(json.dumps(collect(json.loads(sys.stdin.read() or "{}"))), flush=True)
    elif command == "listen" and len(args) == 4:
        listen(int(args[0]), int(args[1]), int(args[2]), float(args[3]))
    elif command == "connect" and len(args) == 2:
        connect(float(args[0]), json.loads(args[1]))
    else:
        sys.stderr.write(__doc__ or "")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
