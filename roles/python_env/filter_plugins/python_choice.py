"""The `python_env_choice` filter: the environment's Python for this host (gpuprov/python_fit.py, the same
code `gpuprov bootstrap`'s preflight runs before any host is touched)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def _python_fit() -> Any:
    try:
        from gpuprov import python_fit
    except ImportError:  # a source checkout used with plain ansible-playbook, gpuprov not installed
        sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))
        from gpuprov import python_fit
    return python_fit


def python_env_choice(
    facts: Mapping[str, Any],
    host: str,
    ansible_facts: Mapping[str, Any],
    pinned: str,
    pytorch_version: str,
    wheel_pythons: Sequence[str],
) -> dict[str, str]:
    """{version, package, problem} for a host, from the role's facts (vars/main.yml) and its own."""
    fit = _python_fit()
    major = str(ansible_facts.get("distribution_major_version", ""))
    distribution, family = str(ansible_facts.get("distribution", "")), str(ansible_facts.get("os_family", ""))
    keys = fit.os_keys(distribution, family, major)
    os_name = f"{ansible_facts.get('distribution', '')} {ansible_facts.get('distribution_version', major)}"
    choice = fit.choose(
        host=host,
        os_name=os_name,
        keys=keys,
        pinned=str(pinned or ""),
        pytorch_version=str(pytorch_version or ""),
        wheel_pythons=list(wheel_pythons or []),
        facts=facts,
        os_version=str(ansible_facts.get("distribution_version", "")),
    )
    return {"version": choice.version, "package": choice.package, "problem": choice.problem}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"python_env_choice": python_env_choice}
