"""What `gpuprov check` was asked for: the check names --only / --skip take, and the options. Light on
purpose: the command reads it for its help and input errors without loading SSH or the launch flow."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuprov import cli_options, console, host_options
from gpuprov.ansible.arguments import parse_extra_vars
from gpuprov.check import host_checks, variables
from gpuprov.errors import BadInput
from gpuprov.launch import api as launch_api

# Result names --only / --skip take; a check function can give several ("torch" gives "python" too).
PER_HOST = [*host_checks.CHECKS, "python"]
CROSS_HOST = ["versions-agree", "ports", "bandwidth"]
QUICK_SKIPS = ("ports", "bandwidth")  # --quick: the per-host checks and what follows from them only
ALL_NAMES = ["ssh", *PER_HOST, *CROSS_HOST]


def parse_names(text: str | None, option: str) -> tuple[str, ...]:
    if text is None:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise BadInput(f"{option} is empty; give check names separated by commas ({', '.join(ALL_NAMES)})")
    unknown = [n for n in names if n not in ALL_NAMES]
    if unknown:
        raise BadInput(
            f"{option}: no check named {', '.join(map(repr, unknown))}; the checks are {', '.join(ALL_NAMES)}"
        )
    return names


def _extra_vars(items: tuple[str, ...]) -> dict[str, Any]:
    """-e as ansible-playbook reads it, then check's own rules (gpuprov.check.variables)."""
    values = parse_extra_vars(items)
    variables.check_extra_vars(values)
    return values


def _names(option: str) -> Callable[[str | None], tuple[str, ...]]:
    return lambda given: parse_names(given, option)


@dataclass(frozen=True)
class CheckOptions:
    """Every option of `gpuprov check`, each written once: its field, click option and check."""

    inventory: Path = host_options.inventory_found()
    limit: str | None = host_options.limit()
    only: tuple[str, ...] = cli_options.option(
        "--only",
        default=None,
        help=f"Only these checks (comma list): {', '.join(ALL_NAMES)}.",
        parse=_names("--only"),
    )
    skip: tuple[str, ...] = cli_options.option(
        "--skip", default=None, help="Leave these checks out (comma list).", parse=_names("--skip")
    )
    quick: bool = cli_options.flag(
        "--quick", help="Per-host checks only (seconds): no port or bandwidth test."
    )
    json: bool = host_options.json_flag("Print every result as JSON on stdout.")
    extra_vars: dict[str, Any] = cli_options.option(
        "-e",
        "--extra-vars",
        multiple=True,
        help="KEY=VALUE or @FILE (YAML/JSON), over the inventory's variables (e.g. -e @lock.yml); not "
        "how a host is reached (ansible_host, ansible_port, ansible_user, the key, the known-hosts file: the "
        "inventory's); become settings and other ssh args pass (check does not use them).",
        parse=_extra_vars,
    )
    image: str | None = launch_api.image_option(
        "Measure the all-reduce bandwidth inside this container image (as `gpuprov launch --image`)."
    )
    verbose: bool = False  # -v of gpuprov itself (finish)

    def wanted(self, name: str) -> bool:
        """Whether the check of this name runs: --only, --skip and --quick."""
        if self.only and name not in self.only:
            return False
        if name in self.skip:
            return False
        return not (self.quick and name in QUICK_SKIPS)


def _finish(opts: CheckOptions) -> CheckOptions:
    """At least one check to run; -v of gpuprov itself."""
    if not any(opts.wanted(name) for name in ALL_NAMES):
        given = [f"--only {','.join(opts.only)}"] if opts.only else []
        given += [f"--skip {','.join(opts.skip)}"] if opts.skip else []
        given += ["--quick"] if opts.quick else []
        asked = opts.only or tuple(ALL_NAMES)
        raise BadInput(
            f"no check left to run: {' '.join(given)} {'leaves' if len(given) == 1 else 'leave'} out every "
            "check asked for "
            f"({', '.join(sorted(asked))}); drop one of the options or name a check it keeps"
        )
    return replace(opts, verbose=console.verbosity() >= console.Verbosity.VERBOSE)


CHECK = cli_options.OptionSet(CheckOptions, _finish)
