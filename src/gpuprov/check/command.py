"""The `gpuprov check` command: options to CheckOptions, then gpuprov.check.flow."""

from __future__ import annotations

import click

from gpuprov.check import options
from gpuprov.errors import ExitCode, Finished


@click.command("check")
@options.CHECK
def check(opts: options.CheckOptions) -> None:
    """Check that the hosts are what the lock says, healthy, and reach each other.

    INVENTORY (or -i INVENTORY) defaults to $GPUPROV_INVENTORY, then ./inventory.ini. Nothing is
    installed or changed on a host. Exit 0: every check passed (warnings listed); 1: a check failed; 8: a
    check could not run and none failed; 2: bad input (before any host is contacted).
    """
    from gpuprov.check import flow  # SSH and the launch flow: only once the options are good

    code = flow.run(opts)
    if code != ExitCode.OK:
        raise Finished(code)  # the results are shown; main() gives the exit code
