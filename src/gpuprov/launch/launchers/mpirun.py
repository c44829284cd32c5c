"""Open MPI's mpirun (`--launcher mpirun`): one mpirun on the first host starts every rank of the job.

The first host's run.sh (templates/mpirun.sh.j2) writes a hostfile of the selected hosts (their inventory
address, `slots=` the host's process count) and runs `mpirun --bind-to none --map-by slot --tag-output`
with the job's environment exported by `-x`. Open MPI's rsh launcher starts its daemon (orted) on each
other host over SSH with onhost/mpirun_rsh_agent.sh (ssh that never prompts, on the run user's
node-to-node trust from the mpi role; it tags the daemon with the job's id), and orted starts that host's
ranks. Each rank is onhost/mpirun_rank.py, which maps Open MPI's OMPI_COMM_WORLD_* variables to
torchrun's and replaces itself with the script. The other hosts' run.sh waits for the job's part there
(onhost/mpirun_standby.py), so that every host's agent reports and stops what runs on it.

mpirun is called by the absolute path the mpi role installs (MPIRUN_PATHS): on EL nothing is on PATH
without `module load mpi/openmpi-x86_64`, on Debian/Ubuntu /usr/bin/mpirun is an alternative another MPI
may own, and only an absolute path makes mpirun give the remote daemons its --prefix (Open MPI 4.1
orted_submit.c), so that orted is found on EL. Preflight, in each host's one check command: that mpirun
and Open MPI's version (the same everywhere), $HOME (mpirun starts every rank with the first host's paths),
and on the first host whether it resolves and reaches each other host over SSH exactly as mpirun's daemons
will be started: ssh with Open MPI's plm_rsh_args, which the mpi role owns (the cluster key, its known
hosts, IdentitiesOnly, StrictHostKeyChecking=yes, BatchMode), read with that Open MPI's ompi_info.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from gpuprov import onhost

if TYPE_CHECKING:
    from gpuprov import hosts
    from gpuprov.launch.preflight import HostCheck, Problem
    from gpuprov.launch.render import HostCommand, SbatchJob

HOST_TEMPLATE = "mpirun.sh.j2"
SBATCH_TEMPLATE = "mpirun-sbatch.sh.j2"
ROLE = "mpi"  # the role that installs Open MPI and the node-to-node trust (docs/mpi.md)
VERSION_SECTION = "launcher-mpirun"
HOME_SECTION = "launcher-mpirun-home"
PEER_SECTION = "launcher-mpirun-peer "  # + the peer's address
NOT_INSTALLED = 127  # the version section's status where there is no mpirun
UNRESOLVED = 68  # a peer section's status where the first host cannot resolve the peer's address
# `mpirun --version` of Open MPI prints "mpirun (Open MPI) 4.1.4" first, `mpirun.openmpi --version`
# "mpirun.openmpi (OpenRTE) 4.1.4" (tests/recorded/mpirun/): the name is argv[0]'s.
_OPEN_MPI = re.compile(r"^\S+ \((?:Open MPI|OpenRTE)\) (\S+)\s*$")
SSH_OPTIONS = "-o BatchMode=yes -o ConnectTimeout=5"
GLOO_BY_ADDRESS = "GPUPROV_GLOO_IFNAMES"  # read by onhost/mpirun_rank.py (its GLOO_BY_ADDRESS)
# The mpirun the mpi role installs (roles/mpi/vars/Debian.yml, RedHat.yml), in the order tried; shell words
# (no quoting). templates/mpirun.sh.j2 tries the same ones (tests/unit/launch/test_mpirun_render.py).
MPIRUN_PATHS = ("/usr/bin/mpirun.openmpi", "/usr/lib64/openmpi/bin/mpirun")
KNOWN_HOSTS = "~/.ssh/gpuprov_mpi_known_hosts"  # the mpi role's (roles/mpi/tasks/trust.yml)
RSH_ARGS_SED = shlex.quote("s/^mca:plm:rsh:param:plm_rsh_args:value://p")


class Mpirun:
    name = "mpirun"
    template_variable = "gpuprov_mpirun_template"
    reserved_env: tuple[str, ...] = ()

    def host_files(self) -> dict[str, bytes]:
        names = ("mpirun_rank.py", "mpirun_standby.py", "mpirun_rsh_agent.sh")
        return {name: onhost.path(name).read_bytes() for name in names}

    def job_env(self) -> dict[str, str]:
        return {}

    def peers_env(self, envs: list[dict[str, str]], checks: list[HostCheck]) -> dict[str, str]:
        """GPUPROV_GLOO_IFNAMES: each host's gloo interface by an address of its own (the one its traffic to
        the peers leaves from), for onhost/mpirun_rank.py: mpirun's -x gives every rank the first host's
        GLOO_SOCKET_IFNAME, and each rank sets its own host's from this."""
        pairs = []
        for check, env in zip(checks, envs, strict=True):
            ifname = env.get("GLOO_SOCKET_IFNAME")
            route = check.route
            address = route.source if route is not None and route.ifname else check.host.address
            if ifname and address:
                pairs.append(f"{address}={ifname}")
        return {GLOO_BY_ADDRESS: ",".join(pairs)} if len(checks) > 1 and pairs else {}

    def host_script(self, command: HostCommand, template: Path | None) -> str:
        from gpuprov.launch import render

        return render.host_script(command, template, HOST_TEMPLATE)

    def sbatch_script(self, job: SbatchJob) -> str:
        """srun --mpi=pmix where Slurm has PMIx, else mpirun inside the allocation. The script asks Slurm for
        --ntasks-per-node ranks: Open MPI takes Slurm's tasks as its slots, so 'gpu' and 'auto' (known only
        once Slurm picked the nodes) would give one slot a node and fail mpirun's ppr mapping."""
        from gpuprov.errors import BadInput
        from gpuprov.launch import render

        if not job.nproc.isdigit():
            raise BadInput(
                f"--launcher mpirun under Slurm needs --nproc-per-node as a number, not {job.nproc!r}: the "
                "sbatch script asks Slurm for that many tasks per node "
                "(e.g. --nproc-per-node 8 on 8-GPU nodes)"
            )
        return render.sbatch_script(job, SBATCH_TEMPLATE)

    def check_command(self, host: hosts.Host, selected: list[hosts.Host]) -> str:
        return check_command(host, selected)

    def problems(self, checks: list[HostCheck]) -> list[Problem]:
        answered = [c for c in checks if VERSION_SECTION in c.launcher_answers]
        found = _installation_problems(answered)
        if found:
            return found
        _warn_idle_gpus(answered)
        return _disagreements(answered) + _peer_problems(checks) + _slot_problems(answered)


def check_command(host: hosts.Host, selected: list[hosts.Host]) -> str:
    """The launcher's part of a host's one preflight command: sections launcher-mpirun (mpirun --version,
    127 without mpirun), launcher-mpirun-home, and on the first host one launcher-mpirun-peer ADDRESS per
    other host (68: the name does not resolve; else ssh's status)."""
    from gpuprov.launch.preflight import SECTION

    lines = [
        f'mpirun=; for m in {" ".join(MPIRUN_PATHS)}; do if [ -x "$m" ]; then mpirun=$m; break; fi; done',
        f"echo '{SECTION}{VERSION_SECTION}'; ( [ -n \"$mpirun\" ] || exit {NOT_INSTALLED}; "
        f'"$mpirun" --version ) 2>&1; r=$?; echo "{SECTION}end $r"',
        f'echo \'{SECTION}{HOME_SECTION}\'; echo "$HOME"; echo "{SECTION}end 0"',
    ]
    if host is selected[0] and len(selected) > 1:
        # ssh as mpirun's daemons will be started: with Open MPI's plm_rsh_args (the mpi role sets the
        # cluster key and its known hosts there), word-split as Open MPI splits them.
        lines.append(
            f'rsh_args=$("${{mpirun%/*}}"/ompi_info --parsable --param plm rsh --level 9 2>/dev/null '
            f"| sed -n {RSH_ARGS_SED})"
        )
        for peer in selected[1:]:
            address = shlex.quote(peer.address)
            lines.append(
                f"echo {shlex.quote(SECTION + PEER_SECTION + peer.address)}; "
                f"if getent ahosts {address} >/dev/null; then "
                f"ssh {SSH_OPTIONS} $rsh_args {address} true </dev/null 2>&1; r=$?; "
                f'else r={UNRESOLVED}; fi; echo "{SECTION}end $r"'
            )
    return "\n".join(lines) + "\n"


def open_mpi_version(output: list[str]) -> str | None:
    """Open MPI's version from `mpirun --version`'s lines; None for another MPI's mpirun."""
    for line in output:
        if line.strip():
            match = _OPEN_MPI.match(line.strip())
            return match.group(1) if match else None
    return None


def _installation_problems(checks: list[HostCheck]) -> list[Problem]:
    from gpuprov.launch.preflight import NOT_READY, Problem

    missing = [c.host.name for c in checks if c.launcher_answers[VERSION_SECTION][1] == NOT_INSTALLED]
    problems = []
    if missing:
        problems.append(
            Problem(
                NOT_READY,
                f"no Open MPI mpirun ({' or '.join(MPIRUN_PATHS)}) on {', '.join(missing)}: apply the role "
                f"`{ROLE}` to "
                f"{'it' if len(missing) == 1 else 'them'} (gpuprov bootstrap -e mpi_enabled=true), "
                "or launch with --launcher torchrun",
            )
        )
    for check in checks:
        lines, rc = check.launcher_answers[VERSION_SECTION]
        if rc in (NOT_INSTALLED, None) or (rc == 0 and open_mpi_version(lines)):
            continue  # None: the session broke, which the environment's check reports
        first = next((line.strip() for line in lines if line.strip()), f"exit status {rc}")
        problems.append(
            Problem(
                NOT_READY,
                f"{check.host.name}: mpirun is not Open MPI's (its version says: {first}); "
                f"gpuprov launches with Open MPI: apply the role `{ROLE}`",
            )
        )
    return problems


def _odd_ones(values: dict[str, str]) -> tuple[list[str], str] | None:
    """The hosts whose value is not the most common one, and that value (None when all agree)."""
    counts = Counter(values.values())
    if len(counts) <= 1:
        return None
    common = counts.most_common(1)[0][0]
    return [f"{name} has {value}" for name, value in values.items() if value != common], common


def _disagreements(checks: list[HostCheck]) -> list[Problem]:
    from gpuprov.launch.preflight import NOT_READY, Problem

    problems = []
    versions = {c.host.name: open_mpi_version(c.launcher_answers[VERSION_SECTION][0]) or "" for c in checks}
    odd = _odd_ones(versions)
    if odd:
        problems.append(
            Problem(
                NOT_READY,
                f"Open MPI versions differ: {', '.join(odd[0])}, the other hosts {odd[1]}; mpirun needs the "
                f"same Open MPI on every host, and each OS release ships its own (the role `{ROLE}` pins "
                "only the series): launch on hosts of one OS release",
            )
        )
    fixes = (
        ("home directories", {c.host.name: _home(c) for c in checks}),
        ("Python envs", {c.host.name: c.python for c in checks if c.python}),
        ("NCCL socket interfaces (nccl_socket_ifname)", {c.host.name: _ifnames(c) for c in checks}),
    )
    for label, values in fixes:
        odd = _odd_ones(values)
        if odd:
            problems.append(
                Problem(
                    NOT_READY,
                    f"{label} differ: {', '.join(odd[0])}, the other hosts {odd[1]}; mpirun starts every "
                    "rank with the first host's paths and environment: make them the same, or use "
                    "--launcher torchrun",
                )
            )
    return problems


def _home(check: HostCheck) -> str:
    lines = check.launcher_answers.get(HOME_SECTION, ([], None))[0]
    return lines[0].strip() if lines else "?"


def _ifnames(check: HostCheck) -> str:
    """The host's NCCL interface setting (the user's): mpirun's -x gives every rank the first host's. Gloo's
    may differ between hosts: each rank takes its own host's (peers_env, mpirun_rank.py)."""
    from gpuprov.launch import interfaces

    return interfaces.user_nccl(check.host) or "none set"


def _peer_problems(checks: list[HostCheck]) -> list[Problem]:
    from gpuprov.launch.preflight import NOT_READY, Problem

    first = checks[0]
    problems = []
    for peer in checks[1:]:
        answer = first.launcher_answers.get(PEER_SECTION + peer.host.address)
        if answer is None or answer[1] == 0:
            continue
        lines, rc = answer
        if rc == UNRESOLVED:
            why = (
                f"cannot resolve {peer.host.name}'s address {peer.host.address} (mpirun's hostfile names it)"
            )
            fix = "give the host an address every host resolves (ansible_host)"
        else:
            last = next((line.strip() for line in reversed(lines) if line.strip()), f"exit status {rc}")
            why = (
                f"cannot start mpirun's daemon on {peer.host.name} over SSH (ssh {peer.host.address}: {last})"
            )
            fix = (
                f"apply the role `{ROLE}` (node-to-node SSH for the run user, host keys checked) to all "
                f"hosts ({peer.host.address} must be a name in {first.host.name}'s {KNOWN_HOSTS})"
            )
        problems.append(Problem(NOT_READY, f"{first.host.name} {why}; {fix}"))
    return problems


def _warn_idle_gpus(checks: list[HostCheck]) -> None:
    """Fewer slots than GPUs is a valid smaller job, but nothing else would say that GPUs stay idle."""
    from gpuprov import console

    for c in checks:
        if c.gpus and 0 < c.nproc < c.gpus:
            console.warning(
                f"{c.host.name} has {c.gpus} GPU(s) and --nproc-per-node gives it {c.nproc} slot(s) in "
                f"mpirun's hostfile: {c.gpus - c.nproc} GPU(s) stay idle ('gpu' or 'auto' uses every GPU)"
            )


def _slot_problems(checks: list[HostCheck]) -> list[Problem]:
    """A host given more slots than it has GPUs: ranks would share a GPU, which NCCL refuses."""
    from gpuprov.launch.preflight import INPUT, Problem

    return [
        Problem(
            INPUT,
            f"{c.host.name} has {c.gpus} GPU(s) but --nproc-per-node gives it {c.nproc} slots in mpirun's "
            "hostfile; give at most one process per GPU ('gpu' or 'auto')",
        )
        for c in checks
        if c.gpus and c.nproc > c.gpus
    ]
