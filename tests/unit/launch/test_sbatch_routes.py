"""The sbatch script finds, on each node, the interface and address its traffic to the peers takes (a first
srun step reads `ip -o route get`), and gives each node's ranks their own GLOO_SOCKET_IFNAME and
PET_LOCAL_ADDR (torchrun's --local-addr): on a stock Debian/Ubuntu host the hostname is on 127.0.1.1, where
gloo and the c10d rendezvous would otherwise go (docs/slurm.md, "Stock /etc/hosts"). Run with bash against a
fake srun, scontrol, getent and ip; ip answers with real recorded lines (tests/recorded/ip-route)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuprov.launch import options, sbatch

RECORDED = Path(__file__).parents[2] / "recorded" / "ip-route"
ADDRESSES = {"node1": "172.17.0.1", "node2": "172.17.0.2"}

# srun: the route step and the job step alike run their command once per node, as SLURMD_NODENAME, in a
# UTS namespace of its own whose host name is the node's (the script keys each node's route by the kernel's
# host name).
FAKE_SRUN = r"""#!/bin/bash
if [ "$1" = --mpi=list ]; then echo "MPI plugin types are... none pmi2 pmix"; exit 0; fi
if [ "$1" = --help ]; then printf '%s\n' "${FAKE_SRUN_HELP:-}"; exit 0; fi
while [ "${1#--}" != "$1" ]; do echo "srun-option $1" >> "$FAKE_LOG"; shift; done
echo "srun $1 $2" >> "$FAKE_LOG"
id=0
for node in $FAKE_NODES; do
  SLURM_NODEID=$id SLURMD_NODENAME=$node \
    unshare --uts bash -c 'hostname "$SLURMD_NODENAME" && exec "$@"' srun-task "$@"
  id=$((id + 1))
done
"""


def _can_name_hosts() -> bool:
    """Whether this machine lets the test give each fake node its own host name (root, or CAP_SYS_ADMIN)."""
    try:
        return subprocess.run(["unshare", "--uts", "hostname", "x"], capture_output=True).returncode == 0
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _can_name_hosts(), reason="unshare --uts needs root (CAP_SYS_ADMIN)")
FAKE_SCONTROL = r"""#!/bin/bash
case "$2" in
  hostnames) printf '%s\n' $FAKE_NODES ;;
  node) case "$3" in node1) a=172.17.0.1 ;; node2) a=172.17.0.2 ;; esac
        echo "NodeName=$3 Arch=x86_64 CoresPerSocket=1"
        echo "   NodeAddr=$a NodeHostName=$3 Version=22.05.8" ;;
esac
"""
FAKE_GETENT = r"""#!/bin/bash
printf '%s      STREAM %s\n%s      DGRAM  \n' "$2" "$2" "$2"
"""
# ip on each node: the recorded line named by FAKE_ROUTE_<node>, or a failure.
FAKE_IP = r"""#!/bin/bash
echo "ip $SLURMD_NODENAME $*" >> "$FAKE_LOG"
var=FAKE_ROUTE_$SLURMD_NODENAME
if [ -z "${!var}" ]; then echo "RTNETLINK answers: Network is unreachable" >&2; exit 2; fi
cat "${!var}"
"""
FAKE_PYTHON = r"""#!/bin/bash
echo "rank-env $SLURMD_NODENAME gloo=${GLOO_SOCKET_IFNAME:-unset} local=${PET_LOCAL_ADDR:-unset}" \
  "rdzv=${PET_RDZV_CONF:-unset}"
"""


def run_script(
    tmp_path: Path,
    nodes: tuple[str, ...],
    routes: dict[str, str],
    env: tuple[str, ...] = (),
    launcher: str = "torchrun",
    submit_env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    script = tmp_path / "train.py"
    script.write_text("")
    opts = options.build(script=str(script), nodes=len(nodes), env=env, emit_sbatch=str(tmp_path / "j.sh"),
                         launcher=launcher, nproc="1")  # fmt: skip
    text = sbatch.build(opts, [])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL), ("getent", FAKE_GETENT),
                       ("ip", FAKE_IP), ("python", FAKE_PYTHON)):  # fmt: skip
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    log.touch()
    run_env = {"PATH": f"{bin_dir}:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(tmp_path),
               "FAKE_LOG": str(log), "FAKE_NODES": " ".join(nodes), "SLURM_JOB_ID": "9",
               "SLURM_JOB_NODELIST": ",".join(nodes),
               "SLURM_NNODES": str(len(nodes)), "GPUPROV_PYTHON": str(bin_dir / "python"),
               **{f"FAKE_ROUTE_{node}": str(RECORDED / name) for node, name in routes.items()},
               **(submit_env or {})}  # fmt: skip
    done = subprocess.run(["bash", "-c", text], env=run_env, cwd=tmp_path, capture_output=True, text=True)
    return done, log.read_text().splitlines()


def rank_env(output: str) -> dict[str, str]:
    return {
        line.split()[1]: " ".join(line.split()[2:])
        for line in output.splitlines()
        if line.startswith("rank-env")
    }


@pytest.mark.parametrize("launcher", ["torchrun", "mpirun"])  # mpirun: srun --mpi=pmix starts the ranks
def test_each_node_gets_the_interface_and_address_of_its_own_route(tmp_path: Path, launcher: str) -> None:
    routes = {"node1": "via-gateway-debian12.txt", "node2": "same-subnet-debian12.txt"}
    done, log = run_script(tmp_path, ("node1", "node2"), routes, launcher=launcher)
    assert done.returncode == 0, done.stderr
    # c10d's store on the first node, said outright: with the hostname on 127.0.1.1 torch would not
    # find that the endpoint is this machine, and every node would be a client.
    assert rank_env(done.stdout) == {
        "node1": "gloo=eth0 local=192.0.2.2 rdzv=is_host=1",
        "node2": "gloo=eth0 local=172.17.0.2 rdzv=is_host=0",
    }
    # The first node asks toward the second (toward itself the kernel answers `local ... dev lo`), the
    # others toward the first.
    assert "ip node1 -o route get 172.17.0.2" in log and "ip node2 -o route get 172.17.0.1" in log
    assert "gpuprov-routes: node1=eth0=192.0.2.2 node2=eth0=172.17.0.2" in done.stdout
    # one route task per node, whatever SLURM_NTASKS the job has (mpirun's asks for one per GPU)
    assert "srun-option --ntasks=2" in log and "srun-option --ntasks-per-node=1" in log


def test_the_jobs_own_rendezvous_settings_keep_is_host(tmp_path: Path) -> None:
    """A job's PET_RDZV_CONF (say a timeout) gets is_host added: replacing it would bring back the 60 s
    client timeout on stock /etc/hosts; a job that sets is_host itself keeps its value."""
    routes = {"node1": "same-subnet-debian12.txt", "node2": "same-subnet-debian12.txt"}
    done, _ = run_script(tmp_path, ("node1", "node2"), routes, env=("PET_RDZV_CONF=join_timeout=900",))
    assert done.returncode == 0, done.stderr
    assert [v.split("rdzv=")[1] for v in rank_env(done.stdout).values()] == [
        "join_timeout=900,is_host=1",
        "join_timeout=900,is_host=0",
    ]
    (tmp_path / "own").mkdir()
    done, _ = run_script(tmp_path / "own", ("node1", "node2"), routes, env=("PET_RDZV_CONF=is_host=0",))
    assert [v.split("rdzv=")[1] for v in rank_env(done.stdout).values()] == ["is_host=0", "is_host=0"]


def test_the_jobs_own_gloo_interface_wins(tmp_path: Path) -> None:
    routes = {"node1": "same-subnet-debian12.txt", "node2": "same-subnet-debian12.txt"}
    done, _ = run_script(tmp_path, ("node1", "node2"), routes, env=("GLOO_SOCKET_IFNAME=ib0",))
    assert done.returncode == 0, done.stderr
    assert rank_env(done.stdout) == {
        "node1": "gloo=ib0 local=172.17.0.2 rdzv=is_host=1",
        "node2": "gloo=ib0 local=172.17.0.2 rdzv=is_host=0",
    }


@pytest.mark.parametrize(
    ("route", "why"),
    [
        ("local-address-debian12.txt", "no interface toward 172.17.0.1 (ip route: local 192.0.2.2 dev lo"),
        (None, "no route toward 172.17.0.1 (RTNETLINK answers: Network is unreachable)"),
    ],
)
def test_a_node_without_a_route_says_so_and_keeps_the_default(
    tmp_path: Path, route: str | None, why: str
) -> None:
    routes = {"node1": "same-subnet-debian12.txt", **({"node2": route} if route else {})}
    done, _ = run_script(tmp_path, ("node1", "node2"), routes)
    assert done.returncode == 0, done.stderr
    assert f"gpuprov: node2: {why}" in done.stderr
    assert rank_env(done.stdout) == {
        "node1": "gloo=eth0 local=172.17.0.2 rdzv=is_host=1",
        "node2": "gloo=unset local=unset rdzv=is_host=0",
    }


def test_one_node_asks_no_route_and_hosts_the_rendezvous(tmp_path: Path) -> None:
    done, log = run_script(tmp_path, ("node1",), {"node1": "same-subnet-debian12.txt"})
    assert done.returncode == 0, done.stderr
    assert [line for line in log if line.startswith("srun ")] == ["srun bash -c"]  # the job step only
    assert "gpuprov-routes" not in done.stdout
    assert not any(line.startswith("ip ") for line in log)
    assert rank_env(done.stdout) == {"node1": "gloo=unset local=unset rdzv=is_host=1"}


def test_the_node_line_carries_the_inventorys_names(tmp_path: Path) -> None:
    """`gpuprov launch --scheduler slurm` sets GPUPROV_NODE_NAMES for nodes the inventory names otherwise
    (launch.slurm_nodes); the client maps each srun label to a name of this line."""
    routes = {"node1": "same-subnet-debian12.txt", "node2": "same-subnet-debian12.txt"}
    names = {"GPUPROV_NODE_NAMES": "node2=10.0.0.2 node1=node1.cluster.test"}
    done, _ = run_script(tmp_path, ("node1", "node2"), routes, submit_env=names)
    assert done.returncode == 0, done.stderr
    assert "gpuprov-nodes: node1.cluster.test 10.0.0.2\n" in done.stdout
    (tmp_path / "plain").mkdir()
    plain, _ = run_script(tmp_path / "plain", ("node1", "node2"), routes)
    assert "gpuprov-nodes: node1 node2\n" in plain.stdout


# The line of `srun --help` in Debian 12's srun 22.05.8 (slurm-client 22.05.8-4+deb12u3); 19.05's has none.
OVERLAP_HELP = "      --overlap               Allow other steps to overlap this step"


@pytest.mark.parametrize(("help_text", "overlaps"), [(OVERLAP_HELP, True), ("", False)])
def test_the_route_step_lets_the_training_step_overlap_it(
    tmp_path: Path, help_text: str, overlaps: bool
) -> None:
    """review 26a 8: the route step holds all the job's CPUs and GPUs (steps are exclusive from 20.11), and
    its cleanup (step epilogs, SPANK plugins) could hold the training step back: --overlap where srun
    has it."""
    routes = {"node1": "same-subnet-debian12.txt", "node2": "same-subnet-debian12.txt"}
    done, log = run_script(tmp_path, ("node1", "node2"), routes, submit_env={"FAKE_SRUN_HELP": help_text})
    assert done.returncode == 0, done.stderr
    assert ("srun-option --overlap" in log) is overlaps
