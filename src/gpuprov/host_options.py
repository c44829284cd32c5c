"""The options of every verb that acts on hosts, defined once (fields for gpuprov.cli_options):

- the inventory: an optional positional INVENTORY or -i/--inventory (one of them; both is an error),
  by default $GPUPROV_INVENTORY, then ./inventory.ini (`inventory_path`, the one default rule, which names
  a defaulted inventory on stderr before any host is contacted);
- --limit PATTERN: an Ansible host pattern that narrows the inventory (gpuprov.hosts.load checks it);
- --nodes N / --hosts H1,H2 (launch and bench): pick from the hosts --limit left, a count or a list;
- --json: the results as JSON on stdout.

A verb that acts on hosts declares `inventory: Path | None = host_options.inventory()` (or
`inventory_found()`, resolved at once) and `limit: str | None = host_options.limit()` in its options
dataclass; tests/unit/test_cli_contract.py fails for a verb whose --help lacks them. Light on purpose
(click only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gpuprov import cli_options, console
from gpuprov.cli_options import Param
from gpuprov.errors import BadInput

INVENTORY_ENV = "GPUPROV_INVENTORY"
DEFAULT_INVENTORY = Path("inventory.ini")
INVENTORY_HELP = "Inventory [default: $GPUPROV_INVENTORY, else ./inventory.ini]."


def inventory_path(given: Path | None) -> Path:
    """The inventory given (INVENTORY or -i), else $GPUPROV_INVENTORY, else ./inventory.ini.

    A default is announced on stderr (even with --quiet) before any host is contacted: bootstrap reboots
    hosts, and an exported $GPUPROV_INVENTORY or a stray inventory.ini must not be acted on unseen. Every
    verb resolves its inventory once (bootstrap, check and bench while parsing, launch when it loads it)."""
    if given is not None:
        return given
    from_env = os.environ.get(INVENTORY_ENV)
    if from_env:
        return _announced(Path(from_env).expanduser(), f"from ${INVENTORY_ENV}")
    if DEFAULT_INVENTORY.exists():
        return _announced(DEFAULT_INVENTORY, f"./{DEFAULT_INVENTORY} in the current directory")
    raise BadInput(
        f"no inventory found: pass -i INVENTORY, set ${INVENTORY_ENV}, or put an inventory.ini in "
        f"{Path.cwd()}"
    )


def default_inventory_exists() -> bool:
    """Whether inventory_path(None) would find an inventory ($GPUPROV_INVENTORY or ./inventory.ini), for a
    verb that also runs without one (`gpuprov lock check LOCK`: the table checks alone)."""
    return bool(os.environ.get(INVENTORY_ENV)) or DEFAULT_INVENTORY.exists()


def _announced(path: Path, origin: str) -> Path:
    console.notice(f"Inventory: {path.absolute()} ({origin})")
    return path


def _inventory(positional: str | None, option: str | None = None) -> Path | None:
    if positional is not None and option is not None:
        raise BadInput(
            f"the inventory is given twice ({positional} as INVENTORY and {option} as -i/--inventory); "
            "give it once"
        )
    given = positional if positional is not None else option
    if given is None:
        return None
    if not given.strip():  # Path("") would be ".": Ansible would run the directory's executables
        raise BadInput("the inventory path is empty; give the path of an INI or YAML inventory")
    return Path(given).expanduser()


_INVENTORY_OPTION = Param(
    "option", ("-i", "--inventory"), {"default": None, "metavar": "INVENTORY", "help": INVENTORY_HELP}
)


_INVENTORY_ARGUMENT = Param(
    "argument", (), {"required": False, "metavar": "[INVENTORY]"}, name="inventory_arg"
)


def inventory() -> Path | None:
    """INVENTORY (optional positional) or -i/--inventory; None: neither (inventory_path decides later)."""
    return cli_options.field(_INVENTORY_ARGUMENT, _INVENTORY_OPTION, parse=_inventory)


def inventory_found() -> Path:
    """INVENTORY or -i/--inventory, else the default rule at once: for a verb that always reads one."""
    return cli_options.field(_INVENTORY_ARGUMENT, _INVENTORY_OPTION, parse=_inventory_found)


def _inventory_found(positional: str | None, option: str | None) -> Path:
    return inventory_path(_inventory(positional, option))


def inventory_option() -> Path | None:
    """-i/--inventory alone, for a verb whose positional arguments are something else (launch: SCRIPT
    and the script's own arguments, which an optional INVENTORY before them would make ambiguous)."""
    return cli_options.field(_INVENTORY_OPTION, parse=lambda given: _inventory(None, given))


# Ansible's subscripts include both ends, unlike a Python slice: with ansible-core 2.19.14 (this venv),
# InventoryManager.subset('gpu_nodes[0:3]') on an 8-host group keeps node1..node4 and 'gpu_nodes[0:4]'
# five hosts (a job's world size). The examples here and in gpuprov.hosts' messages say what they select.
RANGE_EXAMPLE = "'gpu_nodes[0:3]' is the first four: both ends count"


def limit() -> str | None:
    """--limit keeps the inventory's order, whatever the pattern's: `--limit node5,node2` gives node2,
    node5, so launch's master (the first host) is node2; --hosts keeps the order it is given in."""
    return cli_options.option(
        "--limit",
        default=None,
        metavar="PATTERN",
        help=f"Only the hosts this Ansible host pattern matches, in inventory order (e.g. node1; "
        f"{RANGE_EXAMPLE}).",
        parse=_pattern,
    )


def _pattern(given: str | None) -> str | None:
    return given  # checked where the inventory is read (gpuprov.hosts.load), against its hosts


def nodes() -> int | None:
    return cli_options.option(
        "--nodes",
        type=int,
        default=None,
        help="Use the first N hosts of the inventory (of those --limit matches) [default: all].",
        parse=cli_options.optional(cli_options.at_least(1)),
    )


def hosts() -> tuple[str, ...]:
    return cli_options.option(
        "--hosts",
        default=None,
        help="Use these hosts of the inventory (of those --limit matches), comma-separated; the first is "
        "the master.",
        parse=lambda given: () if given is None else parse_hosts(given),
    )


def json_flag(help: str) -> bool:
    """--json, stored as `json`; help says what the verb prints."""
    return cli_options.flag("--json", help=help)


def parse_hosts(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise BadInput(
            "--hosts is empty: give inventory host names separated by commas, e.g. --hosts node1,node2"
        )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise BadInput(f"--hosts names {', '.join(duplicates)} more than once; list each host once")
    return names


def check_selection(nodes: int | None, hosts: tuple[str, ...]) -> None:
    """--nodes and --hosts exclude each other (each alone was checked by its field's parse)."""
    if nodes is not None and hosts:
        raise BadInput("--nodes and --hosts exclude each other: give a count or a list of hosts")


@dataclass(frozen=True)
class Selection:
    """--nodes and --hosts alone (`check`); a verb declares both fields in its own options."""

    nodes: int | None = nodes()
    hosts: tuple[str, ...] = hosts()


def _checked(chosen: Selection) -> Selection:
    check_selection(chosen.nodes, chosen.hosts)
    return chosen


def check(nodes: int | None, hosts: str | None) -> tuple[int | None, tuple[str, ...]]:
    """The node count and host names these raw --nodes and --hosts values give; BadInput (one line)."""
    chosen = cli_options.OptionSet(Selection, _checked).build({"nodes": nodes, "hosts": hosts})
    return chosen.nodes, chosen.hosts
