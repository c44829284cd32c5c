"""The rollout's work on hosts, each through the shared machinery: the batch's bootstrap through the Ansible
engine (playbooks/site.yml limited to the batch, the new lock as `-e @FILE`, the reboot within
--reboot-timeout), the gate through check's API, the gpuprov jobs through launch's API.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuprov import lock_changes
from gpuprov.ansible import arguments, engine, runs
from gpuprov.ansible.arguments import Options
from gpuprov.check import api as check_api
from gpuprov.errors import ExitCode, GpuprovError
from gpuprov.launch import api as launch_api
from gpuprov.upgrade.state import Rollout

VERB = "upgrade"
PLAYBOOK = "site.yml"


def batch_roles(rollout: Rollout, names: list[str], all_roles: bool) -> tuple[str, ...]:
    """The site.yml tags a batch runs: the roles its lock change touches (with what they depend on, the
    preflight always), or () for the whole playbook (--all-roles, or a host whose plan names no role)."""
    if all_roles:
        return ()
    return lock_changes.batch_tags(rollout.host(name)["changes"].get("roles") or [] for name in names)


def apply(
    inventory: Path, names: list[str], lock_file: Path, reboot_timeout_s: float, roles: tuple[str, ...] = ()
) -> dict[str, str]:
    """Bootstrap the batch with the new lock, limited to `roles` (their site.yml tags; () for all of it);
    {host: why} for the hosts where it failed. Ctrl-C (the engine stops Ansible) and a run that failed as a
    whole propagate as GpuprovError."""
    options = Options(
        inventory=inventory,
        extra_vars=(
            f"@{lock_file}",
            # The batch is out of service already: reboot it at once, within the rollout's timeout.
            f"nvidia_driver_reboot_timeout={int(reboot_timeout_s)}",
            f"nvidia_driver_reboot_batch_size={len(names)}",
        ),
        limit=",".join(names),
        tags=roles,
        # The Slurm play needs every cluster host (roles/slurm preflight) and the lock does not change Slurm.
        skip_tags=("slurm",),
    )
    try:
        engine.run_playbook(VERB, arguments.playbook_path(PLAYBOOK), options)
    except GpuprovError as exc:
        if exc.exit_code not in (ExitCode.HOSTS_FAILED, ExitCode.HOSTS_UNREACHABLE):
            raise
        return _failed_hosts(names, exc.message)
    return {}


def _failed_hosts(names: list[str], message: str) -> dict[str, str]:
    """Each host's failure from the run's summary.json (the newest upgrade run of these hosts)."""
    limit = ",".join(names)
    for path in sorted(runs.runs_dir().iterdir(), reverse=True):
        try:
            summary = json.loads((path / runs.SUMMARY).read_text())
        except (OSError, ValueError):
            continue
        if summary.get(runs.VERB) != VERB or summary.get("limit") != limit:
            continue
        failed: dict[str, str] = {}
        for host, entry in (summary.get("hosts") or {}).items():
            if host in names and (entry.get("failed") or entry.get("unreachable")):
                tasks = entry.get("failed_tasks") or [{}]
                what = (
                    "unreachable"
                    if entry.get("unreachable")
                    else f"task {tasks[0].get('task') or '?'!r} failed"
                )
                failed[host] = f"bootstrap: {what} (run {path.name})"
        return failed or {name: message for name in names}
    return {name: message for name in names}


def gate(
    inventory: Path, names: list[str], rollout: Rollout, *, quick: bool, peers: list[str] | None = None
) -> dict[str, str]:
    """`gpuprov check` on the batch with the new lock; {host: the failed checks}. The all-reduce runs on the
    batch's hosts, and on peers when given (upgrade/peers.py: idle hosts in service, for a one-host batch);
    only what names a batch host counts."""
    verdict = check_api.gate(inventory, names, rollout.lock_file, quick=quick, peers=peers or [])
    if verdict.exit_code == 0:
        return {}
    return {name: verdict.reason(name) for name in names if name in verdict.failed}


def ssh_jobs(names: list[str]) -> dict[str, list[str]]:
    return launch_api.active_jobs(names)
