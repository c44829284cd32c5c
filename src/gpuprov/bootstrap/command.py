"""The `gpuprov bootstrap` command: parse and validate input, then call gpuprov.bootstrap.core.run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from gpuprov import cli_options, console, host_options


@dataclass(frozen=True)
class _HostOptions:
    """The options every verb on hosts takes (gpuprov.host_options); bootstrap's own follow as click's."""

    inventory: Path = host_options.inventory_found()
    limit: str | None = host_options.limit()
    json: bool = host_options.json_flag("Print the run's summary as JSON on stdout.")


@click.command("bootstrap")
@cli_options.OptionSet(_HostOptions)
@click.option(
    "-e",
    "--extra-vars",
    "extra_vars",
    multiple=True,
    metavar="KEY=VALUE|@FILE",
    help="A variable for the roles (e.g. a lock: -e @lock.yml); repeatable, later ones win.",
)
@click.option(
    "--tags", multiple=True, metavar="TAGS", help="Only tasks with these tags (comma list; repeatable)."
)
@click.option(
    "--skip-tags", multiple=True, metavar="TAGS", help="Skip tasks with these tags (comma list; repeatable)."
)
@click.option("--check", is_flag=True, help="Dry run: report what would change, change nothing.")
@click.option("--diff", is_flag=True, help="Show the changes made to files.")
@click.option(
    "--forks", type=click.IntRange(min=1), help="Hosts worked on at once [default: all, up to 100]."
)
@click.option(
    "--strategy",
    type=click.Choice(["linear", "mitogen"]),  # arguments.STRATEGIES (not imported: the CLI starts fast)
    default="linear",
    show_default=True,
    envvar="GPUPROV_STRATEGY",
    show_envvar=True,
    help="How Ansible runs the tasks: linear (Ansible's own) or mitogen (Mitogen for Ansible, needs the "
    "gpuprov[mitogen] extra: a no-op re-run costs the hosts far less CPU; not yet the default).",
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="More detail: -v shows every task result; -vv and more raise Ansible's verbosity in the run log.",
)
def bootstrap(
    given: _HostOptions,
    extra_vars: tuple[str, ...],
    tags: tuple[str, ...],
    skip_tags: tuple[str, ...],
    check: bool,
    diff: bool,
    forks: int | None,
    strategy: str,
    verbose: int,
) -> None:
    """Install the GPU stack (driver, CUDA, cuDNN, NCCL, network tuning, PyTorch env) on INVENTORY's hosts.

    INVENTORY (or -i INVENTORY) defaults to $GPUPROV_INVENTORY, then ./inventory.ini. Hosts come from its
    gpu_nodes group (all hosts if it has none). Every host is checked first (SSH with host key checking,
    sudo, OS, the compatibility lock); nothing is applied unless all pass.
    """
    from gpuprov.ansible.arguments import Options
    from gpuprov.bootstrap.core import run  # Ansible and paramiko: only once there is work to do

    if verbose:
        console.set_verbosity(console.Verbosity.VERBOSE)
    options = Options(
        inventory=given.inventory,
        extra_vars=extra_vars,
        limit=given.limit,
        tags=_split(tags),
        skip_tags=_split(skip_tags),
        check=check,
        diff=diff,
        forks=forks,
        json=given.json,
        strategy=strategy,
        verbosity=max(0, verbose - 1),
    )
    run(options)


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())
