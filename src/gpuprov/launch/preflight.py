"""Preflight: every check that can fail before any rank starts, on all hosts at once, all problems together.

Per host: SSH (host key checked), the Python env (from the python_env role's fact file), `import torch`,
torch / CUDA / NCCL versions, GPU count. Across hosts: versions agree, the master port is free on the
master, and every other host can open a TCP connection to the master's address and port.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, field

import paramiko

from gpuprov import hosts
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import remote
from gpuprov.launch.options import DEFAULT_MASTER_PORT, MASTER_PORT_SEARCH, Nproc

FACT_FILE = "/etc/ansible/facts.d/gpuprov_python_env.fact"
DEFAULT_PYTHON = "/opt/gpuprov/envs/train/bin/python"
REACH_TIMEOUT_S = 5.0

# What a successful `import torch` depends on, cheaply: the interpreter, the env's site-packages and torch
# directories (pip changes their mtimes when it installs, upgrades or removes anything) and the linker
# cache (system libraries added or removed). A host keeps the state of its last successful import in
# ~/.gpuprov/torch-import-ok/; while the state is the same, the import (seconds per host) is not repeated.
_ENV_STATE = """
import hashlib, importlib.util, os, sys, sysconfig


def env_state():
    where = sysconfig.get_paths()
    paths = [os.path.realpath(sys.executable), where["purelib"], where["platlib"], "/etc/ld.so.cache"]
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        paths += list(spec.submodule_search_locations)
    digest = hashlib.sha256(os.environ.get("LD_LIBRARY_PATH", "").encode())
    for path in paths:
        try:
            st = os.stat(path)
            digest.update(("%s %d %d %d\\n" % (path, st.st_mtime_ns, st.st_size, st.st_ino)).encode())
        except OSError:
            digest.update(("%s missing\\n" % path).encode())
    return digest.hexdigest()


IMPORT_MARK = os.path.join(os.path.expanduser("~/.gpuprov/torch-import-ok"),
                           hashlib.sha256(sys.executable.encode()).hexdigest()[:16])
"""

# First look: finds the env's torch and reads its versions from its files, in milliseconds, so a missing
# env or torch is reported at once. The real `import torch` (_IMPORT) runs meanwhile and has the last word,
# unless this env imported torch before and has not changed since (env_state).
_PROBE = (
    _ENV_STATE
    + """
import json
info = {"python_version": "%d.%d.%d" % sys.version_info[:3]}
try:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'torch'")
    root = list(spec.submodule_search_locations)[0]
    if not any(n.startswith("_C.") and n.endswith(".so") for n in os.listdir(root)):
        raise ImportError("torch is incomplete: no compiled torch/_C module in " + root)
    ns = {}
    with open(os.path.join(root, "version.py")) as f:
        exec(compile(f.read(), "torch/version.py", "exec"), ns)
    info["torch"] = ns["__version__"]
    info["cuda"] = ns.get("cuda")
    nccl = None
    if info["cuda"]:
        try:
            import importlib.metadata as md
            nccl = md.version("nvidia-nccl-cu" + str(info["cuda"]).split(".")[0])
        except Exception:
            nccl = None
    info["nccl"] = nccl
    try:
        with open(IMPORT_MARK) as f:
            info["imported_before"] = f.read() == env_state()
    except OSError:
        info["imported_before"] = False
except Exception as exc:
    info["error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(info))
"""
)

# The real import, as the ranks will do it: a torch that is there but cannot load (a missing CUDA library,
# a broken wheel) fails here, before any rank starts. Takes a second or more, so it runs in the background
# while the other checks go on (see _start_import).
_IMPORT = (
    _ENV_STATE
    + """
import json
info = {}
state = env_state()
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda
    info["nccl"] = None
    if torch.version.cuda:
        try:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:
            pass
except Exception as exc:
    info["error"] = "%s: %s" % (type(exc).__name__, exc)
else:
    try:
        os.makedirs(os.path.dirname(IMPORT_MARK), exist_ok=True)
        with open(IMPORT_MARK + ".tmp", "w") as f:
            f.write(state)
        os.replace(IMPORT_MARK + ".tmp", IMPORT_MARK)
    except OSError:
        pass  # a read-only home: the import is just repeated next time
print(json.dumps(info))
"""
)
IMPORT_TIMEOUT_S = 120.0

# On the master: bind the port (the given one, or the first free one of a range), say which, then accept
# one connection per other host and report the token each sent.
_LISTEN = """
import socket, sys, time
first, count, expected, timeout = (int(a) for a in sys.argv[1:5])
sock = None
for port in range(first, first + count):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        s.close()
        continue
    sock = s
    break
if sock is None:
    print("busy", flush=True)
    sys.exit(0)
sock.listen(64)
print("port %d" % port, flush=True)
deadline = time.monotonic() + timeout
got = 0
while got < expected and time.monotonic() < deadline:
    sock.settimeout(max(0.05, deadline - time.monotonic()))
    try:
        conn, _ = sock.accept()
    except OSError:
        break
    conn.settimeout(2)
    data = b""
    try:
        # Read to EOF: the worker closes first, so no TIME_WAIT is left on this port for torchrun.
        while True:
            chunk = conn.recv(256)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    conn.close()
    data = data.decode(errors="replace").strip()
    print("got %s" % data, flush=True)
    got += 1
sock.close()
"""

_CONNECT = """
import socket, sys
address, port, token, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
try:
    conn = socket.create_connection((address, port), timeout=timeout)
    conn.sendall(token.encode() + b"\\n")
    conn.close()
except OSError as exc:
    print("error %s" % (exc.strerror or exc), flush=True)
else:
    print("ok", flush=True)
"""


# What a problem keeps from being true; the worst decides the exit code, as in bootstrap's preflight.
UNREACHABLE = "unreachable"  # no SSH session, or it broke: exit 6
NOT_READY = "not ready"  # the host answers but cannot run the job (env, torch, versions, port): exit 7
INPUT = "input"  # an option asks for what the hosts cannot give (--master-port, --nproc-per-node): exit 2


@dataclass(frozen=True)
class Problem:
    kind: str  # UNREACHABLE, NOT_READY or INPUT
    text: str


@dataclass
class HostCheck:
    host: hosts.Host
    client: paramiko.SSHClient | None = None
    python: str = DEFAULT_PYTHON
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    gpus: int = 0
    nproc: int = 0
    problems: list[Problem] = field(default_factory=list)
    importing: tuple[paramiko.ChannelFile, paramiko.ChannelFile] | None = None  # stdout, stderr


@dataclass
class Preflight:
    checks: list[HostCheck]
    master_addr: str
    master_port: int

    @property
    def clients(self) -> dict[str, paramiko.SSHClient]:
        return {c.host.name: c.client for c in self.checks if c.client is not None}

    def close(self) -> None:
        for check in self.checks:
            if check.client is not None:
                check.client.close()


def exit_code(problems: list[Problem]) -> ExitCode:
    """6 when a host could not be reached, else 7 when a host is not ready, else 2 (the README's table)."""
    kinds = {p.kind for p in problems}
    if UNREACHABLE in kinds:
        return ExitCode.HOSTS_UNREACHABLE
    if NOT_READY in kinds:
        return ExitCode.PREFLIGHT_FAILED
    return ExitCode.BAD_INPUT


class PreflightFailed(GpuprovError):
    """Problems on the hosts that keep the job from starting; nothing was started."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = [p.text for p in problems]
        if len(problems) == 1:
            message = f"preflight: {problems[0].text}; nothing was started"
        else:
            message = f"preflight found {len(problems)} problems (listed above); nothing was started"
        super().__init__(message, exit_code(problems))


def run(selected: list[hosts.Host], master_addr: str, master_port: int | None, nproc: Nproc) -> Preflight:
    """All checks; returns open SSH connections, or raises PreflightFailed with every problem."""
    checks = remote.on_all(selected, _check_host)
    result = Preflight(checks, master_addr, master_port or 0)
    try:
        problems: list[Problem] = []
        if checks[0].client is not None and checks[0].torch is not None:
            port, reach_problems = _master_port_and_reach(checks, master_addr, master_port)
            result.master_port = port
            problems += reach_problems
        remote.on_all(checks, _finish_import)
        problems = [p for c in checks for p in c.problems] + problems
        problems += _versions_agree([c for c in checks if c.torch is not None])
        for check in checks:
            if check.torch is None:
                continue
            resolved = nproc.resolve(check.gpus)
            if resolved is None:
                problems.append(
                    Problem(
                        INPUT,
                        f"{check.host.name} has no GPU, but --nproc-per-node gpu asks for one process per "
                        "GPU; give a number or 'auto'",
                    )
                )
            else:
                check.nproc = resolved
        if problems:
            raise PreflightFailed(problems)
    except BaseException:
        result.close()
        raise
    return result


def _check_host(host: hosts.Host) -> HostCheck:
    check = HostCheck(host)
    try:
        check.client = remote.connect(host)
    except hosts.Unreachable as exc:
        check.problems.append(Problem(UNREACHABLE, exc.message))
        return check
    except BadInput as exc:  # a known_hosts file that cannot be read
        check.problems.append(Problem(INPUT, exc.message))
        return check
    except GpuprovError as exc:  # the host key is unknown or changed
        check.problems.append(Problem(NOT_READY, exc.message))
        return check
    try:
        _probe(check)
    except BadInput as exc:  # an inventory value (gpuprov_gpu_count)
        check.problems.append(Problem(INPUT, f"{host.name}: {exc.message}"))
    except GpuprovError as exc:  # the SSH session broke
        check.problems.append(Problem(UNREACHABLE, f"{host.name}: {exc.message}"))
    return check


def _probe(check: HostCheck) -> None:
    assert check.client is not None
    host = check.host
    fact_python = fact_nccl = None
    fact = remote.run(check.client, f"cat {FACT_FILE}", timeout=20)
    if fact.rc == 0:
        try:
            recorded = json.loads(fact.stdout)
            fact_python, fact_nccl = recorded.get("python"), recorded.get("nccl_version")
        except (ValueError, AttributeError):
            check.problems.append(
                Problem(NOT_READY, f"{host.name}: {FACT_FILE} is not valid JSON; re-run `gpuprov bootstrap`")
            )
            return
    check.python = str(host.vars.get("gpuprov_python") or fact_python or DEFAULT_PYTHON)
    probe = remote.run(check.client, remote.python_command(check.python, _PROBE), timeout=60)
    if probe.rc == 127 or "No such file" in probe.stderr:
        where = FACT_FILE if fact.rc == 0 else f"no {FACT_FILE}"
        check.problems.append(
            Problem(
                NOT_READY,
                f"{host.name}: no Python env at {check.python} ({where}); run `gpuprov bootstrap` on it "
                "first (or set gpuprov_python for the host)",
            )
        )
        return
    try:
        info = json.loads(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        check.problems.append(Problem(NOT_READY, f"{host.name}: {check.python} failed: {probe.last_line}"))
        return
    if "error" in info:
        check.problems.append(
            Problem(NOT_READY, f"{host.name}: the env {check.python} has no usable torch ({info['error']})")
        )
        return
    check.torch, check.cuda = info["torch"], info.get("cuda")
    check.nccl = info.get("nccl") or fact_nccl
    if not info.get("imported_before"):
        _start_import(check)
    check.gpus = _gpu_count(check)


def _start_import(check: HostCheck) -> None:
    assert check.client is not None
    try:
        stdin, out, err = check.client.exec_command(
            remote.python_command(check.python, _IMPORT), timeout=IMPORT_TIMEOUT_S
        )
        stdin.channel.shutdown_write()
    except (paramiko.SSHException, OSError) as exc:
        raise GpuprovError(f"SSH failed while starting the torch import check ({exc})") from None
    check.importing = (out, err)


def _finish_import(check: HostCheck) -> None:
    """Wait for the host's `import torch`; its versions replace those read from the files."""
    if check.importing is None:
        return
    out, err = check.importing
    check.importing = None
    name = check.host.name
    stderr = ""
    try:
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        info = json.loads(stdout.strip().splitlines()[-1])
    except (TimeoutError, paramiko.SSHException, OSError, ValueError, IndexError):
        last = (stderr.strip().splitlines() or ["no answer"])[-1]
        check.problems.append(
            Problem(NOT_READY, f"{name}: `import torch` with {check.python} did not report ({last})")
        )
        check.torch = None
        return
    if "error" in info:
        check.problems.append(
            Problem(NOT_READY, f"{name}: the env {check.python} cannot import torch ({info['error']})")
        )
        check.torch = None
        return
    check.torch, check.cuda = info["torch"], info.get("cuda")
    check.nccl = info.get("nccl") or check.nccl


def _gpu_count(check: HostCheck) -> int:
    assert check.client is not None
    given = check.host.vars.get("gpuprov_gpu_count")
    if given is not None:
        try:
            return int(given)
        except (TypeError, ValueError):
            raise BadInput(f"gpuprov_gpu_count {given!r} is not a number; fix the inventory") from None
    smi = remote.run(
        check.client,
        "command -v nvidia-smi >/dev/null || exit 100; nvidia-smi --query-gpu=index --format=csv,noheader",
        timeout=30,
    )
    if smi.rc != 0:  # no nvidia-smi, or "No devices were found"
        return 0
    return len([line for line in smi.stdout.splitlines() if line.strip()])


def _last(out: paramiko.ChannelFile, err: paramiko.ChannelFile, head: str) -> str:
    text = (err.read().decode(errors="replace") + out.read().decode(errors="replace")).strip() or head
    return (text.splitlines() or ["no output"])[-1]


def _versions_agree(checks: list[HostCheck]) -> list[Problem]:
    problems = []
    for label, attr in (("torch", "torch"), ("CUDA (torch.version.cuda)", "cuda"), ("NCCL", "nccl")):
        values = Counter(str(getattr(c, attr)) for c in checks)
        if len(values) <= 1:
            continue
        common, _ = values.most_common(1)[0]
        odd = [f"{c.host.name} has {getattr(c, attr)}" for c in checks if str(getattr(c, attr)) != common]
        problems.append(
            Problem(
                NOT_READY,
                f"{label} versions differ: {', '.join(odd)}, the other hosts {common}; "
                "re-run `gpuprov bootstrap` so every host has the same env",
            )
        )
    return problems


def _master_port_and_reach(
    checks: list[HostCheck], master_addr: str, given_port: int | None
) -> tuple[int, list[Problem]]:
    master = checks[0]
    assert master.client is not None
    workers = [c for c in checks[1:] if c.client is not None and c.torch is not None]
    first, count = (given_port, 1) if given_port else (DEFAULT_MASTER_PORT, MASTER_PORT_SEARCH)
    command = remote.python_command(
        master.python, _LISTEN, str(first), str(count), str(len(workers)), str(int(REACH_TIMEOUT_S) + 2)
    )
    try:
        _, out, err = master.client.exec_command(command, timeout=REACH_TIMEOUT_S + 10)
        head = out.readline().strip()
    except (paramiko.SSHException, OSError) as exc:
        return 0, [Problem(UNREACHABLE, f"{master.host.name}: SSH failed during the port check ({exc})")]
    if not head.startswith(("port ", "busy")):
        return 0, [Problem(NOT_READY, f"{master.host.name}: the port check failed: {_last(out, err, head)}")]
    if not head.startswith("port "):
        if given_port:
            return 0, [
                Problem(
                    INPUT,
                    f"master port {given_port} is in use on {master.host.name}; choose another "
                    "--master-port or leave it out to let gpuprov pick a free one",
                )
            ]
        return 0, [
            Problem(
                NOT_READY,
                f"no free port in {first}-{first + count - 1} on the master {master.host.name}; "
                "give --master-port",
            )
        ]
    port = int(head.split()[1])
    tokens = {c.host.name: f"{c.host.name}-{secrets.token_hex(4)}" for c in workers}
    connect_errors: dict[str, str] = {}
    lock = threading.Lock()

    def reach(check: HostCheck) -> None:
        assert check.client is not None
        cmd = remote.python_command(
            check.python, _CONNECT, master_addr, str(port), tokens[check.host.name], str(REACH_TIMEOUT_S)
        )
        try:
            res = remote.run(check.client, cmd, timeout=REACH_TIMEOUT_S + 10)
            answer = res.stdout.strip() or res.last_line
        except GpuprovError as exc:
            answer = f"error {exc.message}"
        if answer != "ok":
            with lock:
                connect_errors[check.host.name] = answer.removeprefix("error ")

    remote.on_all(workers, reach)
    received = {line.split(" ", 1)[1] for line in out.read().decode(errors="replace").splitlines()
                if line.startswith("got ")}  # fmt: skip
    problems = []
    for check in workers:
        name = check.host.name
        if name in connect_errors or tokens[name] not in received:
            why = connect_errors.get(name, "the master did not receive the test connection")
            problems.append(
                Problem(
                    NOT_READY,
                    f"{name} cannot reach the master {master.host.name} at {master_addr}:{port} ({why}); "
                    f"check the address (ansible_host or gpuprov_master_addr of {master.host.name}) and "
                    "firewalls",
                )
            )
    return port, problems
