"""--launcher mpirun's preflight: its sections run in each host's one check command (a local shell stands in
for each host, as in test_round_trips), `mpirun` answering with recorded real `mpirun --version` outputs
(tests/recorded/mpirun/SOURCES.md), `ssh` a stand-in that fails for the addresses a test names.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuprov import hosts, ssh
from gpuprov.launch import launchers, preflight
from gpuprov.launch.launchers import mpirun
from gpuprov.launch.options import Nproc
from tests.unit.launch.test_probe import _torch
from tests.unit.launch.test_round_trips import Counting, LocalChannel

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "mpirun"
OPEN_MPI_414 = RECORDED / "openmpi-4.1.4-debian12.txt"
OPEN_MPI_414_DEBIAN_NAME = RECORDED / "openmpi-4.1.4-debian12-mpirun.openmpi.txt"
OPEN_MPI_506 = RECORDED / "openmpi-5.0.6-first-line.txt"
OPEN_MPI_416 = RECORDED / "openmpi-4.1.6-first-lines-ubuntu24.04.txt"
MPICH = RECORDED / "mpich-4.0.2-debian12.txt"
MPIRUN = mpirun.Mpirun()
AUTO = Nproc("auto")


class PerHost(Counting):
    """Counting, with each host's own environment (its PATH: which mpirun it has)."""

    def __init__(self, envs: dict[str, dict[str, str]]) -> None:
        super().__init__(next(iter(envs.values())))
        self.envs = envs

    def open_channel(self, client: Any, command: str, **_: Any) -> Any:
        self.round_trips[client] += 1
        channel = LocalChannel(command, self.envs[client])
        self.channels.append(channel)
        return ssh.Channel(channel)


# What the hosts' check commands use besides mpirun and ssh: PATH holds these alone, so that an mpirun of
# this machine's own is never found.
TOOLS = ("cat", "sed", "head", "getent", "sh", "bash")


OMPI_INFO = RECORDED / "ompi_info-param-plm-rsh-4.1.4-debian12.txt"


def _bin(root: Path, version_output: Path | None, ssh_fails: str) -> Path:
    root.mkdir(parents=True)
    for tool in TOOLS:
        (root / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    if version_output is not None:
        (root / "mpirun").write_text(f"#!/bin/sh\ncat {version_output}\n")
        (root / "ompi_info").write_text(f"#!/bin/sh\ncat {OMPI_INFO}\n")
    # ssh ADDRESS... true: fails as OpenSSH does for a host key it does not know, for the listed addresses.
    (root / "ssh").write_text(
        f'#!/bin/sh\necho "$@" >> {root}/ssh.calls\nfor a; do addr=$prev; prev=$a; done\n'
        f'case " {ssh_fails} " in *" $addr "*) echo "Host key verification failed." >&2; exit 255;; esac\n'
    )
    for name in ("mpirun", "ompi_info", "ssh"):
        if (root / name).exists():
            os.chmod(root / name, 0o755)
    return root


def _preflight(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    versions: dict[str, Path | None],
    addresses: dict[str, str] | None = None,
    ssh_fails: str = "",
    gpus: int | None = None,
    nproc: Nproc = AUTO,
    per_host_vars: dict[str, dict[str, object]] | None = None,
) -> tuple[PerHost, preflight.Preflight | preflight.PreflightFailed]:
    site = _torch(tmp_path / "site")
    envs = {}
    for name, output in versions.items():
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        path = str(_bin(tmp_path / "bin" / name, output, ssh_fails))
        envs[name] = {
            "HOME": str(home),
            "PATH": path,
            "PYTHONPATH": str(site),
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPI_BIN": path,
        }
    # The stand-in mpirun where the role's would be (each host's own): the paths are shell words.
    monkeypatch.setattr(mpirun, "MPIRUN_PATHS", ('"$MPI_BIN"/mpirun',))
    fake = PerHost(envs)
    for name in ("connect", "open_channel", "run"):
        monkeypatch.setattr(ssh, name, getattr(fake, name))
    host_vars: dict[str, object] = {"gpuprov_python": sys.executable}
    if gpus is not None:
        host_vars["gpuprov_gpu_count"] = gpus
    selected = [
        hosts.Host(
            n,
            (addresses or {}).get(n, "127.0.0.1"),
            22,
            "u",
            None,
            tmp_path / "kh",
            vars={**host_vars, **(per_host_vars or {}).get(n, {})},
        )
        for n in versions
    ]
    try:
        result: Any = preflight.run(selected, "127.0.0.1", None, nproc, None, MPIRUN)
    except preflight.PreflightFailed as exc:
        result = exc
    for channel in fake.channels:
        channel.close()
    return fake, result


def test_two_hosts_with_the_same_open_mpi_pass_in_one_round_trip_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, result = _preflight(tmp_path, monkeypatch, {"node1": OPEN_MPI_414, "node2": OPEN_MPI_414})
    assert isinstance(result, preflight.Preflight), result
    assert fake.round_trips == {"node1": 1, "node2": 1}
    first, second = result.checks
    assert first.launcher_answers[mpirun.VERSION_SECTION] == (OPEN_MPI_414.read_text().splitlines(), 0)
    assert first.launcher_answers[mpirun.PEER_SECTION + "127.0.0.1"] == ([], 0)  # ssh node2 true worked
    assert mpirun.PEER_SECTION + "127.0.0.1" not in second.launcher_answers  # only the first host asks
    # ssh as mpirun's daemons will be started: with Open MPI's plm_rsh_args (the recorded ompi_info's).
    assert (tmp_path / "bin" / "node1" / "ssh.calls").read_text() == (
        "-o BatchMode=yes -o ConnectTimeout=5 -i /h/key -o IdentitiesOnly=yes -o UserKnownHostsFile=/h/kh "
        "-o BatchMode=yes 127.0.0.1 true\n"
    )
    result.close()


def test_different_nccl_interfaces_are_refused_and_gloo_ones_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mpirun's -x gives every rank the first host's NCCL_SOCKET_IFNAME; gloo's each rank sets for its own
    host (GPUPROV_GLOO_IFNAMES), so hosts may name that interface differently."""
    versions = {"node1": OPEN_MPI_414, "node2": OPEN_MPI_414}
    gloo = {"node1": {"gloo_socket_ifname": "lo"}, "node2": {"gloo_socket_ifname": "lo,lo"}}
    _, passed = _preflight(tmp_path / "a", monkeypatch, versions, per_host_vars=gloo)
    assert isinstance(passed, preflight.Preflight), passed
    passed.close()
    nccl = {"node1": {"nccl_socket_ifname": "eth0"}, "node2": {"nccl_socket_ifname": "ens5"}}
    _, refused = _preflight(tmp_path / "b", monkeypatch, versions, per_host_vars=nccl)
    assert isinstance(refused, preflight.PreflightFailed)
    assert any(
        p.startswith(
            "NCCL socket interfaces (nccl_socket_ifname) differ: node2 has ens5, the other hosts eth0"
        )
        for p in refused.problems
    ), refused.problems


def test_the_master_takes_the_interface_holding_the_address_its_peers_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The master's route is toward the master address (gpuprov_master_addr may be a cluster network's),
    the workers' toward it too, so both ends of gloo's connections use that network."""
    _, result = _preflight(tmp_path, monkeypatch, {"node1": OPEN_MPI_414, "node2": OPEN_MPI_414})
    assert isinstance(result, preflight.Preflight), result
    master, worker = (check.route for check in result.checks)
    assert master is not None and worker is not None
    assert (master.toward, master.source, master.ifname) == ("127.0.0.1", "127.0.0.1", "lo")
    assert (worker.toward, worker.ifname) == ("127.0.0.1", "lo")
    result.close()


def test_no_mpirun_names_the_hosts_and_the_role(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, result = _preflight(tmp_path, monkeypatch, {"node1": OPEN_MPI_414, "node2": None, "node3": None})
    assert isinstance(result, preflight.PreflightFailed)
    assert result.exit_code == 7
    assert str(result) == (
        'preflight: no Open MPI mpirun ("$MPI_BIN"/mpirun) on node2, node3: apply the role `mpi` to them '
        "(gpuprov bootstrap -e "
        "mpi_enabled=true), or launch with --launcher torchrun; nothing was started"
    )


def test_different_open_mpi_versions_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {"node1": OPEN_MPI_414, "node2": OPEN_MPI_506, "node3": OPEN_MPI_414}
    _, result = _preflight(tmp_path, monkeypatch, versions)
    assert isinstance(result, preflight.PreflightFailed) and result.exit_code == 7
    assert "Open MPI versions differ: node2 has 5.0.6, the other hosts 4.1.4" in str(result)


def test_another_mpis_mpirun_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, result = _preflight(tmp_path, monkeypatch, {"node1": OPEN_MPI_414, "node2": MPICH})
    assert isinstance(result, preflight.PreflightFailed) and result.exit_code == 7
    assert "node2: mpirun is not Open MPI's (its version says: HYDRA build details:)" in str(result)


def test_a_peer_the_first_host_cannot_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    addresses = {"node2": "node2.invalid"}
    _, result = _preflight(tmp_path, monkeypatch, {"node1": OPEN_MPI_414, "node2": OPEN_MPI_414}, addresses)
    assert isinstance(result, preflight.PreflightFailed) and result.exit_code == 7
    # Among others: node1 finds no interface toward node2 either (gpuprov.launch.interfaces)
    resolve = "node1 cannot resolve node2's address node2.invalid (mpirun's hostfile names it)"
    assert any(problem.startswith(resolve) for problem in result.problems), result.problems


def test_a_peer_without_node_to_node_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    addresses = {"node1": "127.0.0.1", "node2": "127.0.0.2"}
    versions = {"node1": OPEN_MPI_414, "node2": OPEN_MPI_414}
    _, result = _preflight(tmp_path, monkeypatch, versions, addresses, ssh_fails="127.0.0.2")
    assert isinstance(result, preflight.PreflightFailed) and result.exit_code == 7
    assert str(result) == (
        "preflight: node1 cannot start mpirun's daemon on node2 over SSH (ssh 127.0.0.2: Host key "
        "verification failed.); apply the role `mpi` (node-to-node SSH for the run user, host keys checked) "
        "to all hosts (127.0.0.2 must be a name in node1's ~/.ssh/gpuprov_mpi_known_hosts); "
        "nothing was started"
    )


def test_more_slots_than_gpus_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {"node1": OPEN_MPI_414, "node2": OPEN_MPI_414}
    _, result = _preflight(tmp_path, monkeypatch, versions, gpus=2, nproc=Nproc("count", 4))
    assert isinstance(result, preflight.PreflightFailed) and result.exit_code == 2  # input: --nproc-per-node
    assert result.problems == [
        f"{name} has 2 GPU(s) but --nproc-per-node gives it 4 slots in mpirun's hostfile; give at most one "
        "process per GPU ('gpu' or 'auto')"
        for name in versions
    ]


def test_fewer_slots_than_gpus_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    versions = {"node1": OPEN_MPI_414, "node2": OPEN_MPI_414}
    _, result = _preflight(tmp_path, monkeypatch, versions, gpus=4, nproc=Nproc("count", 1))
    assert not isinstance(result, preflight.PreflightFailed)
    err = capsys.readouterr().err
    for name in versions:
        assert (
            f"{name} has 4 GPU(s) and --nproc-per-node gives it 1 slot(s) in mpirun's hostfile: "
            "3 GPU(s) stay idle ('gpu' or 'auto' uses every GPU)"
        ) in " ".join(err.split())


def test_torchrun_asks_nothing_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (
        launchers.by_name("torchrun").check_command(hosts.Host("a", "b", 22, "u", None, tmp_path), []) == ""
    )


@pytest.mark.parametrize(
    ("recorded", "version"),
    [
        (OPEN_MPI_414, "4.1.4"),
        (OPEN_MPI_414_DEBIAN_NAME, "4.1.4"),
        (OPEN_MPI_416, "4.1.6"),
        (OPEN_MPI_506, "5.0.6"),
        (MPICH, None),
    ],
)
def test_open_mpi_version_from_recorded_output(recorded: Path, version: str | None) -> None:
    assert mpirun.open_mpi_version(recorded.read_text().splitlines()) == version
