"""The programs launch's preflight runs on each host, before anything is pushed or started.

Standard library only: it runs with the env's Python on the host, not yet known good (Python 3.6 parses it:
see gpuprov.onhost), sent as the text of `python -c` in the same SSH command (nothing is written to a host
that preflight may turn down), with gpuprov/onhost/sockets.py's code in place of its import
(gpuprov.onhost.program).
Each command prints its answer on stdout:

    probe.py look                                  one JSON line: the env's torch, read from its files
    probe.py import                                one JSON line: torch's versions after a real `import torch`
    probe.py check                                 look's line, then (on stdin) listen or connect, while
                                                   import runs in a thread when it is needed (see check())
    probe.py listen FIRST COUNT EXPECTED TIMEOUT   `port N` (or `busy`), then `got TOKEN` per connection
    probe.py connect ADDRESS PORT TOKEN TIMEOUT    `ok`, or `error WHY`
    probe.py route ADDRESS                         `route JSON`: the local address and interface that carry
                                                   traffic to ADDRESS, what the hostname resolves to
    probe.py rdma                                  `rdma JSON`: NCCL_IB_HCA as NCCL would read it, and the
                                                   host's RDMA devices and their ports

`look` takes milliseconds, so a missing env or torch is reported at once; `import` (seconds) has the last
word and runs meanwhile, unless this env imported torch before and has not changed since (env_state).
`check` is what preflight runs: all of them on one channel per host.
"""

import fcntl
import hashlib
import importlib.util
import ipaddress
import json
import os
import pwd
import socket
import struct
import sys
import sysconfig
import threading
import time
from typing import Dict, List, Optional

from gpuprov.onhost.sockets import accept_tokens, bind_first, send_token

LINKER_CACHE = "/etc/ld.so.cache"


def env_state() -> str:
    """A digest of what a successful `import torch` depends on, cheaply.

    The interpreter, the env's site-packages and torch directories (pip changes their mtimes when it
    installs, upgrades or removes anything) and the linker cache's content (system libraries added or
    removed; its content, not its file: NVIDIA's container hooks rewrite /etc/ld.so.cache in every new
    container, the same content for one image and one driver).
    """
    where = sysconfig.get_paths()
    paths = [os.path.realpath(sys.executable), where["purelib"], where["platlib"]]
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.submodule_search_locations:
        paths += list(spec.submodule_search_locations)
    digest = hashlib.sha256(os.environ.get("LD_LIBRARY_PATH", "").encode())
    try:
        with open(LINKER_CACHE, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    except OSError:
        digest.update(b"no linker cache\n")
    for path in paths:
        try:
            st = os.stat(path)
            digest.update(f"{path} {st.st_mtime_ns} {st.st_size} {st.st_ino}\n".encode())
        except OSError:
            digest.update(f"{path} missing\n".encode())
    return digest.hexdigest()


MARK_DIR_VARIABLE = "GPUPROV_IMPORT_MARK_DIR"


def import_mark() -> str:
    """Where a host keeps the env_state of this interpreter's last successful `import torch`: in
    ~/.gpuprov/torch-import-ok, or where GPUPROV_IMPORT_MARK_DIR says (launch --image's check container: a
    directory the host keeps per image, since the container's own files go with it)."""
    name = hashlib.sha256(sys.executable.encode()).hexdigest()[:16]
    directory = os.environ.get(MARK_DIR_VARIABLE) or os.path.expanduser("~/.gpuprov/torch-import-ok")
    return os.path.join(directory, name)


def look() -> Dict[str, object]:
    """The env's torch, CUDA and NCCL versions from torch's files, without importing it."""
    info: Dict[str, object] = {"python_version": ".".join(map(str, sys.version_info[:3]))}
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("No module named 'torch'")
        root = next(iter(spec.submodule_search_locations))
        if not any(n.startswith("_C.") and n.endswith(".so") for n in os.listdir(root)):
            raise ImportError("torch is incomplete: no compiled torch/_C module in " + root)
        ns: Dict[str, object] = {}
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
            with open(import_mark()) as f:
                info["imported_before"] = f.read() == env_state()
        except OSError:
            info["imported_before"] = False
    except Exception as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
    return info


def import_torch() -> Dict[str, object]:
    """The real import, as the ranks will do it: a torch that is there but cannot load fails here."""
    info: Dict[str, object] = {}
    state = env_state()
    try:
        import torch  # type: ignore[import-not-found]

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
        info["error"] = f"{type(exc).__name__}: {exc}"
        return info
    mark = import_mark()
    try:
        os.makedirs(os.path.dirname(mark), exist_ok=True)
        with open(mark + ".tmp", "w") as f:
            f.write(state)
        os.replace(mark + ".tmp", mark)
    except OSError:
        pass  # a read-only home: the import is just repeated next time
    return info


def listen(first: int, count: int, expected: int, timeout: float) -> None:
    """On the master: bind the first free port of first..first+count-1, say which, then accept up to
    `expected` connections (for `timeout` seconds) and print the token each sent."""
    sock = bind_first(range(first, first + count))
    if sock is None:
        _say("busy")
        return
    _say(f"port {sock.getsockname()[1]}")
    accept_tokens(sock, expected, time.monotonic() + timeout, _say)


def connect(address: str, port: int, token: str, timeout: float) -> None:
    """On a worker: open a TCP connection to the master's address and port and send the token."""
    answer = send_token(address, port, token, timeout)
    _say(answer if answer == "ok" else f"error {answer}")


SIOCGIFADDR = 0x8915  # linux/sockios.h: an interface's (primary) IPv4 address
IF_INET6 = "/proc/net/if_inet6"  # every IPv6 address of the host and its interface (proc(5))
HOSTS = "/etc/hosts"


def ipv6_interfaces(text: str) -> Dict[str, str]:
    """/proc/net/if_inet6's addresses (32 hex digits, then index, prefix, scope, flags, name) -> interface."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 6 and len(fields[0]) == 32:
            found[str(ipaddress.IPv6Address(int(fields[0], 16)))] = fields[5]
    return found


def ipv4_address(name: str) -> Optional[str]:
    """An interface's IPv4 address (the kernel's SIOCGIFADDR answer; None without one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            answer = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(answer[20:24])


def interface_of(address: str, names: List[str]) -> Optional[str]:
    """The interface that holds a local address (IPv4: each interface's address; IPv6: if_inet6)."""
    if ":" in address:
        try:
            with open(IF_INET6) as f:
                return ipv6_interfaces(f.read()).get(str(ipaddress.IPv6Address(address.split("%")[0])))
        except (OSError, ValueError):
            return None
    return next((name for name in names if ipv4_address(name) == address), None)


def hosts_line(text: str, hostname: str) -> Optional[str]:
    """The first /etc/hosts line that names hostname (the one the resolver answers from), comments cut."""
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) > 1 and hostname in fields[1:]:
            return " ".join(fields)
    return None


def route(address: str) -> Dict[str, object]:
    """Which local address and interface carry traffic to address (a UDP socket's connect picks the
    route and sends nothing), the host's interfaces, and what its hostname resolves to, in order (gloo
    without GLOO_SOCKET_IFNAME binds to the first of these it can: ProcessGroupGloo createDefaultDevice)."""
    names = [name for _, name in socket.if_nameindex()]
    info: Dict[str, object] = {"interfaces": names, "hostname": socket.gethostname()}
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(address, 9, 0, socket.SOCK_DGRAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.connect(sockaddr)
            source = str(s.getsockname()[0])
        info["source"] = source
        info["ifname"] = interface_of(source, names)
    except OSError as exc:
        info["error"] = f"{type(exc).__name__}: {exc}"
    try:
        found = socket.getaddrinfo(str(info["hostname"]), None, 0, socket.SOCK_STREAM)
        info["resolves"] = list(dict.fromkeys(str(ai[4][0]) for ai in found))
    except OSError:
        info["resolves"] = []
    try:
        with open(HOSTS) as f:
            info["hosts_line"] = hosts_line(f.read(), str(info["hostname"]))
    except OSError:
        info["hosts_line"] = None
    return info


IB_CLASS = "/sys/class/infiniband"  # one directory per RDMA device, its ports under ports/
NCCL_CONF = "/etc/nccl.conf"


def nccl_setting(name: str) -> Dict[str, object]:
    """An NCCL variable's value and where NCCL would take it from: the environment, else the file
    NCCL_CONF_FILE names (else ~/.nccl.conf), else /etc/nccl.conf. NCCL's initEnv reads those files in that
    order with setenv(name, value, 0), so the first value found wins, in a file too (nccl src/misc/param.cc);
    a line is NAME=VALUE, '#' first comments it out."""
    if os.environ.get(name):
        return {"value": os.environ[name], "from": "the environment"}
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir  # NCCL's userHomeDir() asks the same
    except KeyError:  # a container's --user UID with no passwd entry: NCCL reads no ~/.nccl.conf then
        home = None
    user_file = os.environ.get("NCCL_CONF_FILE") or (os.path.join(home, ".nccl.conf") if home else None)
    files = [user_file, NCCL_CONF] if user_file else [NCCL_CONF]
    for path in files:
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            key, eq, value = line.partition("=")
            if eq and not line.startswith("#") and key == name:
                return {"value": value, "from": path}
    return {"value": None, "from": None}


def rdma() -> Dict[str, object]:
    """NCCL_IB_HCA as NCCL would read it and the host's RDMA devices with their port numbers."""
    devices: Dict[str, List[int]] = {}
    try:
        names = sorted(os.listdir(IB_CLASS))
    except OSError:
        names = []
    for device in names:
        try:
            ports = os.listdir(os.path.join(IB_CLASS, device, "ports"))
        except OSError:
            ports = []
        devices[device] = sorted(int(p) for p in ports if p.isdigit())
    info = nccl_setting("NCCL_IB_HCA")
    info["devices"] = devices
    return info


_output = threading.Lock()


def _say(line: str) -> None:
    """One whole line on stdout (check's import thread and its listen or connect share it)."""
    with _output:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def check() -> None:
    """look's line at once; then, while a needed `import torch` runs in a thread (its line `import JSON`
    when done), the `listen ...`, `connect ...`, `route ...` or `rdma` commands read from stdin (listen
    ends with `listened`), until end of input. An env without a usable torch ends after look's line."""
    found = look()
    _say(json.dumps(found))
    if "error" in found:
        return
    importing = None
    if not found.get("imported_before"):
        importing = threading.Thread(target=lambda: _say("import " + json.dumps(import_torch())))
        importing.start()
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["listen"] and len(words) == 5:
            listen(int(words[1]), int(words[2]), int(words[3]), float(words[4]))
            _say("listened")
        elif words[:1] == ["connect"] and len(words) == 5:
            connect(words[1], int(words[2]), words[3], float(words[4]))
        elif words[:1] == ["route"] and len(words) == 2:
            _say("route " + json.dumps(route(words[1])))
        elif words == ["rdma"]:
            _say("rdma " + json.dumps(rdma()))
    if importing is not None:
        importing.join()


def main(argv: List[str]) -> int:
    command, args = (argv[0], argv[1:]) if argv else ("", [])
    if command == "look" and not args:
        print(json.dumps(look()), flush=True)
    elif command == "import" and not args:
        print(json.dumps(import_torch()), flush=True)
    elif command == "check" and not args:
        check()
    elif command == "listen" and len(args) == 4:
        listen(int(args[0]), int(args[1]), int(args[2]), float(args[3]))
    elif command == "connect" and len(args) == 4:
        connect(args[0], int(args[1]), args[2], float(args[3]))
    elif command == "route" and len(args) == 1:
        print(json.dumps(route(args[0])), flush=True)
    elif command == "rdma" and not args:
        print(json.dumps(rdma()), flush=True)
    else:
        sys.stderr.write(__doc__ or "")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
