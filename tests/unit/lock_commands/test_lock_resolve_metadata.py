"""lock_commands/metadata.py with onhost/fetch_url.py really run: the "hosts" run their commands on this
machine (ssh.connect and ssh.run faked: the command line is the one sent over SSH), and fetch from a local
HTTP server laid out as NVIDIA's repositories (flat apt with Packages.gz; rpm with repodata and a gzipped
primary) and a PEP 503 torch page. No sandbox node is started."""

from __future__ import annotations

import functools
import gzip
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuprov import host_preflight, hosts, ssh
from gpuprov.lock_commands import metadata
from gpuprov.repo_metadata import DEBIAN, RPM

OS_RELEASE = {
    "node1": 'NAME="Debian GNU/Linux"\nID=debian\nVERSION_ID="12"\n',
    "node2": 'NAME="Rocky Linux"\nID="rocky"\nVERSION_ID="9.4"\n',
}
PACKAGES = "".join(
    f"Package: {name}\nArchitecture: amd64\nVersion: {version}\n\n"
    for name, version in [
        ("cuda-toolkit-12-6", "12.6.3-1"),
        ("nvidia-kernel-open-dkms", "570.124.06-1"),
        ("libnccl2", "2.23.4-1+cuda12.6"),
        ("libnccl-dev", "2.23.4-1+cuda12.6"),
    ]
)
REPOMD = (
    '<repomd xmlns="http://linux.duke.edu/metadata/repo"><data type="primary">'
    '<location href="repodata/abc-primary.xml.gz"/></data></repomd>'
)
PRIMARY = (
    '<metadata xmlns="http://linux.duke.edu/metadata/common">'
    '<package type="rpm"><name>cuda-toolkit-12-6</name>'
    '<arch>x86_64</arch><version epoch="0" ver="12.6.3" rel="1"/></package></metadata>'
)
TORCH = (
    '<html><body><a href="../../wheels/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=00">'
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl</a>"
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "www"
    (root / "cuda/repos/debian12/x86_64").mkdir(parents=True)
    (root / "cuda/repos/debian12/x86_64/Packages.gz").write_bytes(gzip.compress(PACKAGES.encode()))
    (root / "cuda/repos/rhel9/x86_64/repodata").mkdir(parents=True)
    (root / "cuda/repos/rhel9/x86_64/repodata/repomd.xml").write_text(REPOMD)
    (root / "cuda/repos/rhel9/x86_64/repodata/abc-primary.xml.gz").write_bytes(
        gzip.compress(PRIMARY.encode())
    )
    (root / "pypi/simple/torch").mkdir(parents=True)
    (root / "pypi/simple/torch/index.html").write_text(TORCH)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


@pytest.fixture
def local_hosts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ssh.connect gives the host itself; ssh.run runs the command here (os-release: the host's own)."""
    sent: list[str] = []

    def run(client: hosts.Host, command: str, timeout: float = 60, stdin: bytes | None = None) -> ssh.Result:
        sent.append(command)
        if command == "cat /etc/os-release":
            return ssh.Result(0, OS_RELEASE[client.name], "")
        proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout)
        return ssh.Result(proc.returncode, proc.stdout, proc.stderr)

    monkeypatch.setattr(ssh, "connect", lambda host, timeout=0: _Closable(host))
    monkeypatch.setattr(
        host_preflight, "read_gpus", lambda client: ()
    )  # this machine's own are not the hosts'
    monkeypatch.setattr(ssh, "run", run)
    return sent


class _Closable(hosts.Host):
    def __init__(self, host: hosts.Host) -> None:
        super().__init__(**{f: getattr(host, f) for f in host.__dataclass_fields__})

    def close(self) -> None:
        pass


def inventory(tmp_path: Path, base: str, **extra: str) -> hosts.Inventory:
    lines = [f"{k}={v}" for k, v in extra.items()]
    (tmp_path / "inventory.ini").write_text(
        "[gpu_nodes]\nnode1 ansible_host=10.0.0.1\nnode2 ansible_host=10.0.0.2\n[gpu_nodes:vars]\n"
        f"ansible_python_interpreter=python3\nnvidia_repository_base_url={base}/cuda/repos\n"
        f"python_env_pytorch_index_url={base}/pypi/simple\n" + "\n".join(lines) + "\n"
    )
    return hosts.load(tmp_path / "inventory.ini")


def test_each_os_repository_and_the_index_read_through_the_hosts(
    server: str, local_hosts: list[str], tmp_path: Path
) -> None:
    found = metadata.gather(inventory(tmp_path, server))
    assert found.problems == []
    assert [(h.host.name, h.repository) for h in found.hosts] == [("node1", "debian12"), ("node2", "rhel9")]
    assert found.offers["debian12"].cuda == {"12.6.3"} and found.offers["rhel9"].cuda == {"12.6.3"}
    assert found.offers["debian12"].drivers == {"570.124.06": {"open"}}  # debian12's name (DEBIAN scheme)
    assert found.offers["debian12"].nccl == {("2.23.4", "12.6")}
    assert found.torch == {("2.13.0", "cpu", "cp311")}
    fetched = [c for c in local_hosts if "fetch_url" in c or "urlopen" in c]
    assert len(fetched) == 4  # one Packages.gz, repomd + primary, one index page: one host per OS
    assert metadata._FAMILY_KIND == {"ubuntu": "apt", "debian": DEBIAN, "rhel": RPM}


def test_a_repository_that_cannot_be_read_is_a_line_per_host_of_it(
    server: str, local_hosts: list[str], tmp_path: Path
) -> None:
    found = metadata.gather(inventory(tmp_path, server + "/missing"))
    by_host = {p.host: (p.check, p.message) for p in found.problems}
    assert sorted(by_host) == ["node1", "node2"]
    check, message = by_host["node1"]
    assert check == "repository"
    assert message.startswith(
        f"cannot read debian12's metadata at {server}/missing/cuda/repos/debian12/x86_64: "
    )
    assert "HTTP Error 404" in message and "\n" not in message
