"""The `gpuprov` command line: parses and validates input, then calls the core modules.

Errors a user can cause end as one line on stderr and a documented exit code (gpuprov.errors.ExitCode).
Importing it stays cheap: the commands load paramiko, Ansible and the sandbox's cluster code when they run,
not when `gpuprov --help` or an input error is all there is to do (tests/unit/test_cli.py checks).
"""

from __future__ import annotations

import importlib
import sys

import click

from gpuprov import __version__, console
from gpuprov.errors import ExitCode, GpuprovError
from gpuprov.sandbox import spec

# Commands that live in their own modules, one line each: name -> "module:attribute". A module is imported
# when its command runs (or --help lists it), so `gpuprov launch` does without bootstrap's, check's and
# bench's modules (about 0.04 CPU seconds of every launch's start; docs/performance.md "Launch speed").
_COMMAND_MODULES = {
    "bootstrap": "gpuprov.bootstrap.command:bootstrap",
    "check": "gpuprov.check.command:check",
    "launch": "gpuprov.launch.commands:launch",
    "jobs": "gpuprov.launch.commands:jobs",
    "logs": "gpuprov.launch.commands:logs",
    "stop": "gpuprov.launch.commands:stop",
    "bench": "gpuprov.bench.command:bench",
    "lock": "gpuprov.lock_commands.command:lock",
    "upgrade": "gpuprov.upgrade.command:upgrade",
}


class _Commands(click.Group):
    """The command group, with the commands of _COMMAND_MODULES imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _COMMAND_MODULES:
            module, attribute = _COMMAND_MODULES[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gpuprov")
@click.option("-v", "--verbose", is_flag=True, help="Show the commands gpuprov runs and their output.")
@click.option("-q", "--quiet", is_flag=True, help="Print only results and errors.")
def cli(verbose: bool, quiet: bool) -> None:
    """Provision GPU servers for distributed PyTorch training, then launch jobs on them."""
    if verbose and quiet:
        raise click.UsageError("--verbose and --quiet exclude each other")
    if verbose:
        console.set_verbosity(console.Verbosity.VERBOSE)
    elif quiet:
        console.set_verbosity(console.Verbosity.QUIET)


@cli.group()
def sandbox() -> None:
    """A local cluster of containers that stand in for GPU servers (for trying gpuprov and its tests)."""


_name_option = click.option(
    "--name", default="default", show_default=True, help="Sandbox name; several can run side by side."
)


@sandbox.command("up")
@click.option("--nodes", type=int, default=None, help=f"Number of nodes, 1-{spec.MAX_NODES} [default: 2].")
@click.option(
    "--os",
    "os_list",
    default=None,
    help="Node OS: debian12, ubuntu22.04 or rocky9; a comma list assigns them to nodes in turn "
    "[default: debian12].",
)
@click.option(
    "--slurm",
    is_flag=True,
    help="Write the inventory for a Slurm cluster: node1 runs slurmctld, every node slurmd "
    "(debian12 nodes only; give it on every `sandbox up` of this sandbox).",
)
@click.option(
    "--containers",
    is_flag=True,
    help="Also run an image registry the nodes trust (TLS) and push a PyTorch CPU image to it; the "
    "inventory names it in gpuprov_sandbox_image (kept on later `sandbox up`s of this sandbox).",
)
@_name_option
def sandbox_up(nodes: int | None, os_list: str | None, name: str, slurm: bool, containers: bool) -> None:
    """Start a sandbox (or add nodes to it) and write its inventory."""
    parsed_os = spec.parse_os_list(os_list) if os_list is not None else None
    spec.validate_name(name)
    if nodes is not None:
        spec.validate_node_count(nodes)
    from gpuprov.sandbox import cluster

    cluster.up(name, nodes, parsed_os, slurm=slurm, containers=containers)


@sandbox.command("down")
@_name_option
def sandbox_down(name: str) -> None:
    """Remove every container, network and file the sandbox made."""
    from gpuprov.sandbox import cluster

    if cluster.down(name):
        console.success(f"Sandbox {name!r} removed")
    else:
        console.info(f"No sandbox named {name!r}; nothing to remove.")


@sandbox.command("inventory")
@_name_option
def sandbox_inventory(name: str) -> None:
    """Print the path of the sandbox's inventory."""
    from gpuprov.sandbox import cluster

    console.result(str(cluster.inventory_path(name)))


def main(argv: list[str] | None = None) -> None:
    """Entry point: turn every expected failure into one line and an exit code."""
    try:
        cli.main(args=argv, prog_name="gpuprov", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        console.error("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        # Usage mistakes: one line that says what is wrong and where to read more.
        command = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else "gpuprov"
        console.error(f"{exc.format_message()} (see '{command} --help')")
        sys.exit(ExitCode.BAD_INPUT)
    except GpuprovError as exc:
        if exc.message:  # errors.Finished: the command has said it all
            console.error(exc.message)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        console.error("interrupted; anything this command was creating has been removed")
        sys.exit(ExitCode.INTERRUPTED)
    sys.exit(ExitCode.OK)
