"""One rank of a gpuprov job started by Open MPI's mpirun: `python mpirun_rank.py ADDR PORT SCRIPT [ARGS]`.

mpirun (--launcher mpirun) starts this file once per rank, beside agent.py in the job's directory on
every host. A torch DDP script reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; env:// initialisation) and PyTorch has no `mpi://` init
(pytorch#8290), so this maps the variables Open MPI defines on every process it starts
(docs.open-mpi.org, v5.0.x "Environment variables set for MPI applications"; the same four names under
Open MPI 4.1.4's mpirun, seen here) to torchrun's, sets the master (the first host and the port preflight
reserved there), and replaces itself with `python SCRIPT ARGS`: the same process, so mpirun's signals and
exit status are the script's own.

Standard library only, no import from gpuprov; parses on Python 3.6 (it runs with the job's Python).
"""

import ipaddress
import os
import socket
import sys
from typing import Dict, List, Mapping, Optional

# Open MPI's name -> torchrun's name.
MAPPING = (
    ("OMPI_COMM_WORLD_RANK", "RANK"),
    ("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"),
    ("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE"),
)
# Each host's gloo interface by an address of its own (launchers/mpirun.py peers_env): mpirun's -x gives
# every rank the first host's GLOO_SOCKET_IFNAME, and hosts may name their interfaces differently.
GLOO_BY_ADDRESS = "GPUPROV_GLOO_IFNAMES"
USAGE = "usage: mpirun_rank.py MASTER_ADDR MASTER_PORT SCRIPT [ARGS...] (started by Open MPI's mpirun)"


class NotUnderMpirun(Exception):
    pass


def torch_env(environ: Mapping[str, str], master_addr: str, master_port: str) -> Dict[str, str]:
    """The environment of the rank's script: environ with torchrun's variables from Open MPI's."""
    missing = [name for name, _ in MAPPING if not environ.get(name, "").isdigit()]
    if missing:
        raise NotUnderMpirun(
            "mpirun_rank.py: {} not set: this is started by Open MPI's mpirun (gpuprov launch "
            "--launcher mpirun), not by hand".format(", ".join(missing))
        )
    env = dict(environ)
    for ompi_name, torch_name in MAPPING:
        env[torch_name] = environ[ompi_name]
    env["MASTER_ADDR"] = master_addr
    env["MASTER_PORT"] = master_port
    ifname = own_gloo_ifname(environ.get(GLOO_BY_ADDRESS, ""))
    if ifname:
        env["GLOO_SOCKET_IFNAME"] = ifname
    return env


def own_gloo_ifname(by_address: str) -> Optional[str]:
    """The interface named beside an address of this host ("ADDR=IFNAME,..."). An address is this host's
    when the kernel picks it as the source toward itself (a UDP connect sends nothing); binding would not
    tell, where net.ipv4.ip_nonlocal_bind lets any address be bound."""
    for pair in by_address.split(","):
        address, sep, ifname = pair.rpartition("=")
        if not (sep and address and ifname):
            continue
        try:
            wanted = ipaddress.ip_address(address)
            with socket.socket(
                socket.AF_INET6 if wanted.version == 6 else socket.AF_INET, socket.SOCK_DGRAM
            ) as s:
                s.connect((address, 9))
                source = ipaddress.ip_address(s.getsockname()[0])
        except (OSError, ValueError):
            continue
        if source == wanted:
            return ifname
    return None


def main(argv: List[str]) -> int:
    if len(argv) < 4 or not argv[2].isdigit():
        sys.stderr.write(USAGE + "\n")
        return 2
    master_addr, master_port, script = argv[1], argv[2], argv[3]
    try:
        env = torch_env(os.environ, master_addr, master_port)
    except NotUnderMpirun as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, script, *argv[4:]], env)
    return 1  # not reached: execve replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv))
