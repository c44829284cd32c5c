"""The `gpuprov upgrade` command: options to UpgradeOptions, then gpuprov.upgrade.core."""

from __future__ import annotations

import click

from gpuprov.errors import ExitCode, Finished
from gpuprov.upgrade.options import UPGRADE, UpgradeOptions


@click.command("upgrade")
@UPGRADE
def upgrade(opts: UpgradeOptions) -> None:
    """Move INVENTORY's hosts to the lock in NEW_LOCK, batch by batch, each drained, checked, returned.

    The plan comes first (--dry-run: only the plan). Then a canary (--canary N), then batches of
    --max-unavailable hosts: each is taken out of service (Slurm: drained with a reason naming gpuprov;
    running jobs end on their own within --drain-timeout, never killed unless --kill-jobs), bootstrapped
    with NEW_LOCK (rebooted where the driver changes, within --reboot-timeout), gated by `gpuprov check`
    with NEW_LOCK (a one-host batch with an idle peer), and returned to service; a host an administrator
    drained stays drained. A failed host stays out with
    the reason; the rollout stops after --max-failures. The state is kept after every step: --resume goes
    on. Exit 0: done; 1: stopped (a failure); 2: bad input; 4: another upgrade of INVENTORY runs; 6 / 7:
    preflight (unreachable, not ready); 130: interrupted.
    """
    from gpuprov.upgrade import core  # SSH and Ansible: only once the options are good

    code = core.run(opts)
    if code != ExitCode.OK:
        raise Finished(code)
