"""What other verbs may use of check: run it on some hosts of an inventory with a given lock, as a gate.

`gpuprov upgrade` gates every batch with it: the hosts' versions against the new lock, their GPUs' health,
the matmul, and (unless quick) the ports and the all-reduce against the threshold. It is `gpuprov check`
itself (the same table on the console, the results kept in the state dir); the caller gets each host's
failed checks back. Importing this module loads neither paramiko nor Ansible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuprov.check.options import CHECK


@dataclass(frozen=True)
class Verdict:
    exit_code: int
    failed: dict[str, list[str]] = field(default_factory=dict)  # host -> "check: detail" of what failed

    def reason(self, host: str) -> str:
        return "; ".join(self.failed.get(host, [])) or f"the check ended with exit {self.exit_code}"


def gate(
    inventory: Path, names: Sequence[str], lock_file: Path, *, quick: bool, peers: Sequence[str] = ()
) -> Verdict:
    """`gpuprov check` on the named hosts with the lock in lock_file (a YAML file holding `gpu_stack:`, as
    `-e @FILE` takes it) over the inventory's. A result that failed
    (or could not run) on a pair or on the cluster counts against every host it names.

    peers: hosts outside names that join the cross-host checks (the ports, the all-reduce and its pairs), so
    that a single host's all-reduce crosses the network; what fails on a peer alone counts against no host
    of names, and versions-agree is left out (a peer may still run the old lock)."""
    from gpuprov.check import flow  # SSH and the launch flow: only when a gate runs

    given = {
        "inventory": str(inventory),
        "limit": ",".join([*names, *peers]),
        "quick": quick,
        "extra_vars": (f"@{lock_file}",),
    }
    opts = CHECK.build({**given, "skip": "versions-agree"} if peers else given)
    summary = flow.summarised(opts)
    failed: dict[str, list[str]] = {}
    for result in summary["results"]:
        if result["status"] not in ("fail", "could-not-run"):
            continue
        line = f"{result['check']}: {result['detail'] or result['status']}"
        on = {result["host"], *result["host"].split(" <-> ")}
        named = [n for n in names if n in on]
        if not named and on & set(peers):
            continue  # the peer's own: not the batch's to answer for
        for name in named or list(names):  # "cluster": every host of the gate
            failed.setdefault(name, []).append(line)
    return Verdict(int(summary["exit_code"]), failed)
