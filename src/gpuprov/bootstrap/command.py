"""The `gpuprov bootstrap` command: parse and validate input, then call gpuprov.bootstrap.core.run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuprov import cli_options, console, host_options

if TYPE_CHECKING:
    from gpuprov.ansible.arguments import Options


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    parts = tuple(part.strip() for value in values for part in value.split(","))
    if any(not part for part in parts):  # dropped, `--tags ''` would apply every task instead of none
        raise cli_options.Invalid("a tag name is empty; give tag names separated by commas")
    return parts


def _tags(flag: str, help: str) -> tuple[str, ...]:
    return cli_options.option(flag, multiple=True, metavar="TAGS", help=help, parse=_split)


@dataclass(frozen=True)
class BootstrapOptions:
    """Every option of `gpuprov bootstrap`, each written once; the fields that gpuprov.ansible.arguments'
    Options also has are handed over by name (`engine_options`)."""

    inventory: Path = host_options.inventory_found()
    limit: str | None = host_options.limit()
    json: bool = host_options.json_flag("Print the run's summary as JSON on stdout.")
    extra_vars: tuple[str, ...] = cli_options.option(
        "-e",
        "--extra-vars",
        multiple=True,
        metavar="KEY=VALUE|@FILE",
        help="A variable for the roles (e.g. a lock: -e @lock.yml); repeatable, later ones win.",
        parse=tuple,  # as given, in order: the engine parses them (gpuprov.ansible.arguments)
    )
    tags: tuple[str, ...] = _tags("--tags", "Only tasks with these tags (comma list; repeatable).")
    skip_tags: tuple[str, ...] = _tags("--skip-tags", "Skip tasks with these tags (comma list; repeatable).")
    check: bool = cli_options.flag("--check", help="Dry run: report what would change, change nothing.")
    diff: bool = cli_options.flag("--diff", help="Show the changes made to files.")
    full: bool = cli_options.flag(
        "--full",
        help="Run every role on every host, even where the drift check finds nothing changed since the last "
        "ok run (its verify steps run too).",
    )
    forks: int | None = cli_options.option(
        "--forks",
        type=click.IntRange(min=1),
        default=None,
        help="Hosts worked on at once [default: all, up to 100].",
        parse=cli_options.optional(int),  # click's IntRange checked it (and wrote the error line)
    )
    strategy: str = cli_options.option(
        "--strategy",
        type=click.Choice(["linear", "mitogen"]),  # arguments.STRATEGIES (not imported: the CLI starts fast)
        default="linear",
        show_default=True,
        envvar="GPUPROV_STRATEGY",
        show_envvar=True,
        help="How Ansible runs the tasks: linear (Ansible's own) or mitogen (Mitogen for Ansible, needs the "
        "gpuprov[mitogen] extra: a no-op re-run costs the hosts far less CPU; not yet the default).",
        parse=str,
    )
    verbose: int = cli_options.option(
        "-v",
        "--verbose",
        count=True,
        default=0,
        help="More detail: -v shows every task result; -vv and more raise Ansible's verbosity in the run "
        "log.",
        parse=int,
    )

    def engine_options(self) -> Options:
        """The engine's options: every field of the same name, and Ansible's verbosity (-vv is its -v)."""
        from gpuprov.ansible.arguments import Options

        names = {f.name for f in dataclasses.fields(Options)}
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name in names}
        return Options(**shared, verbosity=max(0, self.verbose - 1))


@click.command("bootstrap")
@cli_options.OptionSet(BootstrapOptions)
def bootstrap(given: BootstrapOptions) -> None:
    """Install the GPU stack (driver, CUDA, cuDNN, NCCL, network tuning, PyTorch env) on INVENTORY's hosts.

    INVENTORY (or -i INVENTORY) defaults to $GPUPROV_INVENTORY, then ./inventory.ini. Hosts come from its
    gpu_nodes group (all hosts if it has none). Every host is checked first (SSH with host key checking,
    sudo, OS, the compatibility lock); nothing is applied unless all pass.
    """
    from gpuprov.bootstrap.core import run  # Ansible and paramiko: only once there is work to do

    if given.verbose:
        console.set_verbosity(console.Verbosity.VERBOSE)
    run(given.engine_options(), full=given.full)
