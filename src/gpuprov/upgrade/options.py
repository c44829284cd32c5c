"""`gpuprov upgrade`'s options, each written once, and their checks (click only: no SSH, no Ansible)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import click

from gpuprov import cli_options, host_options
from gpuprov.errors import BadInput

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


def duration(given: str) -> float:
    """Seconds from "90", "90s", "30m" or "2h"."""
    found = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", str(given))
    if not found:
        raise cli_options.Invalid('give a duration such as "600", "30m" or "2h"')
    return float(int(found.group(1)) * _UNITS[found.group(2)])


@dataclass(frozen=True)
class Unavailable:
    """--max-unavailable: a count of hosts, or a percent of the hosts upgraded (at least one host)."""

    count: int
    percent: bool

    def hosts(self, total: int) -> int:
        if not self.percent:
            return self.count
        return max(1, total * self.count // 100)

    def __str__(self) -> str:
        return f"{self.count}{'%' if self.percent else ''}"


def unavailable(given: str) -> Unavailable:
    found = re.fullmatch(r"\s*(\d+)\s*(%?)\s*", str(given))
    if not found or int(found.group(1)) < 1 or (found.group(2) and int(found.group(1)) > 100):
        raise cli_options.Invalid('give a number of hosts (e.g. "2") or a percent of them (e.g. "25%")')
    return Unavailable(int(found.group(1)), bool(found.group(2)))


def _lock_path(given: str) -> Path:
    if not given.strip():
        raise BadInput("NEW_LOCK is empty; give a YAML file with a 'gpu_stack:' mapping")
    return Path(given).expanduser()


def _seconds(flag: str, default: str, what: str) -> float:
    return cli_options.option(flag, default=default, show_default=True, metavar="DURATION", help=what,
                              parse=duration)  # fmt: skip


@dataclass(frozen=True)
class UpgradeOptions:
    lock: Path = cli_options.argument(metavar="NEW_LOCK", parse=_lock_path)
    inventory: Path = host_options.inventory_found()
    limit: str | None = host_options.limit()
    json: bool = host_options.json_flag("Print the plan and one JSON event per step on stdout.")
    dry_run: bool = cli_options.flag("--dry-run", help="Show the plan only; change nothing.")
    resume: bool = cli_options.flag("--resume", help="Continue the interrupted or stopped rollout.")
    canary: int = cli_options.option(
        "--canary", type=int, default=1, show_default=True, metavar="N",
        help="Hosts upgraded first, alone; the rest wait until they pass.", parse=cli_options.at_least(0),
    )  # fmt: skip
    max_unavailable: Unavailable = cli_options.option(
        "--max-unavailable", default="1", show_default=True, metavar="N|P%",
        help="Hosts out of service at once after the canary.", parse=unavailable,
    )  # fmt: skip
    max_failures: int = cli_options.option(
        "--max-failures", type=int, default=1, show_default=True, metavar="N",
        help="Stop the rollout once this many hosts failed.", parse=cli_options.at_least(1),
    )  # fmt: skip
    drain_timeout: float = _seconds("--drain-timeout", "2h", "How long to wait for a host's jobs to end.")
    kill_jobs: bool = cli_options.flag(
        "--kill-jobs",
        help="Past --drain-timeout, cancel the batch's jobs (scancel; gpuprov stop) instead of failing the "
        "host; each job ends on all its hosts.",
    )
    reboot_timeout: float = _seconds("--reboot-timeout", "15m", "How long a host may take to come back.")
    gate: str = cli_options.option(
        "--gate", type=click.Choice(["full", "quick"]), default="full", show_default=True,
        help="The check on each batch: full (with the all-reduce) or quick (no ports, no all-reduce).",
        parse=str,
    )  # fmt: skip
    allow_downgrade: bool = cli_options.flag(
        "--allow-downgrade", help="Allow a part to go to an older version."
    )
    all_roles: bool = cli_options.flag(
        "--all-roles", help="Apply all of site.yml to each batch, not only the roles the new lock changes."
    )


UPGRADE = cli_options.OptionSet(UpgradeOptions)
