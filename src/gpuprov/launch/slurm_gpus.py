"""How many GPUs a job asks Slurm for on each node (`--gres=gpu:N`), read from the partition's nodes.

A job must ask for its GPUs: an exclusive job holds every GPU of its nodes, but a job step gets only the
generic resources the job *requested*, "except those implicitly requested when a job is exclusive" (srun(1)
of 22.05.8, --gres), so a torchrun step of a job that asked for none cannot use the GPUs and gets no
CUDA_VISIBLE_DEVICES. The count is the smallest of the partition's nodes, so any node Slurm picks has it.
`--gres` rather than `--gpus-per-node`: Slurm rejects the --gpu* options unless SelectType is
select/cons_tres (gres.shtml), and a site's cluster may run select/cons_res.
"""

from __future__ import annotations

import re
import shlex

from gpuprov import console, ssh
from gpuprov.errors import BadInput

# One entry of sinfo's %G (a node's Gres): NAME[:TYPE]:COUNT, optionally followed by "(S:0-1)" (the sockets
# gres.conf gives with Cores=), e.g. "gpu:8", "gpu:h100:8(S:0-1)"; "(null)" when the node has none.
_ENTRY = re.compile(r"^(?P<name>[^:(]+)(?::[^:(]+)?:(?P<count>\d+)(?:\(.*\))?$")


def gpu_count(gres: str) -> int:
    """The GPUs in one node's Gres as sinfo's %G writes it (types summed; 0 for "(null)")."""
    total = 0
    for entry in _split(gres):
        match = _ENTRY.match(entry)
        if match and match["name"] == "gpu":
            total += int(match["count"])
    return total


def _split(gres: str) -> list[str]:
    """The comma-separated entries, keeping the commas inside "(S:0,1)" in their entry."""
    entries, depth, current = [], 0, ""
    for char in gres.strip():
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(current)
            current = ""
        else:
            current += char
    return [*entries, current] if current else entries


def parse_node_gpus(text: str) -> dict[str, int]:
    """`sinfo --noheader --Node --format '%N %G'` lines: each node's GPU count."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2:
            counts[parts[0]] = gpu_count(parts[1])
    return counts


def per_node(client: ssh.Client, partition: str, controller: str, usable: list[str] | None = None) -> int:
    """The GPUs to ask for on each node of the partition: the smallest count among its nodes (those that can
    take the job, where named: a drained node is left out of it); 0: ask for none."""
    listed = ssh.run(client, f"sinfo --noheader --Node --partition {shlex.quote(partition)} --format '%N %G'")
    counts = parse_node_gpus(listed.stdout)
    if usable is not None:
        counts = {node: count for node, count in counts.items() if node in usable} or counts
    if listed.rc != 0 or not counts:
        raise BadInput(
            f"Slurm on {controller} does not list the GPUs of partition {partition} "
            f"(sinfo: {listed.last_line}); check that slurmctld answers (`sinfo` there)"
        )
    fewest = min(counts.values())
    short = sorted(node for node, count in counts.items() if count < max(counts.values()))
    if short:  # one GPU off the bus (or a node without GPUs) sets every node's rank count
        console.warning(
            f"partition {partition}'s nodes do not have the same GPUs ({uneven(counts)}): the job asks for "
            f"{fewest} per node, so every node runs {fewest} rank(s) with --nproc-per-node auto; fix or "
            f"drain {', '.join(short)} (`scontrol update nodename=NODE state=drain reason=...`)"
        )
    return fewest


def uneven(counts: dict[str, int]) -> str:
    """'node1 8, node3 7': each node's count, for the warning."""
    return ", ".join(f"{node} {count}" for node, count in sorted(counts.items()))
