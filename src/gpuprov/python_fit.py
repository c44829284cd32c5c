"""Which Python a host's training environment gets, so that the locked PyTorch has wheels for it.

The facts live in the python_env role's `vars/main.yml` (one copy, with their sources): the OS's own
python3 per OS, the newer Pythons the OS's own repositories add (EL's AppStream: `python39`,
`python3.11`, `python3.12`), and the Pythons each PyTorch minor publishes wheels for (PyTorch's RELEASE.md,
"Release Compatibility Matrix"). The role chooses with `choose` through its filter plugin
(roles/python_env/filter_plugins/python_choice.py) and `gpuprov bootstrap`'s preflight asks the same
function per host before any host is touched, so both refuse the same hosts with the same line.

Standard library only: the filter plugin loads this module without the rest of gpuprov.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The keys of the role's vars/main.yml this module reads.
OS_PYTHONS = "__python_env_os_pythons"
EXTRA_PYTHONS = "__python_env_os_extra_pythons"
EXTRA_SINCE = "__python_env_os_extra_pythons_since"
PYTORCH_PYTHONS = "__python_env_pytorch_pythons"
# /etc/os-release IDs of the EL family, whose facts are kept under "RedHat-<major>" as Ansible's os_family.
EL_IDS = ("rocky", "rhel", "almalinux", "centos")


@dataclass(frozen=True)
class Choice:
    version: str  # "3.11", or "" when nothing fits
    package: str  # the EL package of /usr/bin/python<version> ("python3.11", "python39", "python3"), or ""
    problem: str  # "" when a Python fits, else one line: what is wrong and what would fit


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _minor(version: str) -> str:
    return ".".join(str(version).split(".")[:2])


def pytorch_range(pytorch_version: str, table: Mapping[str, Sequence[str]]) -> tuple[str, str] | None:
    """The [oldest, newest] Python with wheels of this PyTorch: its minor's row, else the newest row below it
    (a newer PyTorch never supports older Pythons than the release before it); None when nothing is known."""
    wanted = _key(_minor(pytorch_version))
    rows = sorted((_key(str(k)), (str(v[0]), str(v[1]))) for k, v in table.items())
    below = [pythons for minor, pythons in rows if minor <= wanted]
    return below[-1] if below else None


def os_keys(distribution: str, os_family: str, major: str) -> list[str]:
    """The keys a host's facts are kept under: "Ubuntu-22" first, then "RedHat-9" for the EL family."""
    return [f"{distribution}-{major}", f"{os_family}-{major}"]


def _fits(version: str, supported: tuple[str, str] | None, wheel_pythons: Sequence[str]) -> bool:
    in_range = supported is None or _key(supported[0]) <= _key(version) <= _key(supported[1])
    return in_range and (not wheel_pythons or version in wheel_pythons)


def choose(
    *,
    host: str,
    os_name: str,
    keys: Sequence[str],
    pinned: str,
    pytorch_version: str,
    wheel_pythons: Sequence[str],
    facts: Mapping[str, Any],
    os_version: str = "",
) -> Choice:
    """The newest Python of the OS (its python3, then what its repositories add, those of its minor
    release: `os_version`, "9.3"; without a minor, as CentOS Stream's "9": every one) that the locked
    PyTorch publishes wheels for and the wheel index carries (`wheel_pythons`, empty: every one); the
    pinned one when `pinned` is set. `pytorch_version` empty: no PyTorch, any Python fits."""
    os_python = next((str(facts[OS_PYTHONS][k]) for k in keys if k in facts[OS_PYTHONS]), "")
    extras: Mapping[str, str] = next(
        (facts[EXTRA_PYTHONS][k] for k in keys if k in facts.get(EXTRA_PYTHONS, {})), {}
    )
    since: Mapping[str, str] = next(
        (facts[EXTRA_SINCE][k] for k in keys if k in facts.get(EXTRA_SINCE, {})), {}
    )
    offered = {os_python: "python3"} if os_python else {}
    offered.update(
        {
            str(v): str(p)
            for v, p in extras.items()
            if len(_key(os_version)) < 2 or _key(os_version)[:2] >= _key(str(since.get(v, "0")))
        }
    )
    supported = pytorch_range(pytorch_version, facts[PYTORCH_PYTHONS]) if pytorch_version else None
    wheels = [str(v) for v in wheel_pythons] if pytorch_version else []
    candidates = [str(pinned)] if pinned else list(offered)
    fitting = sorted((v for v in candidates if _fits(v, supported, wheels)), key=_key, reverse=True)
    if fitting:
        return Choice(fitting[0], offered.get(fitting[0], ""), "")
    problem = _refusal(host, os_name, pinned, pytorch_version, supported, wheels, offered)
    return Choice("", "", problem)


def _refusal(
    host: str,
    os_name: str,
    pinned: str,
    pytorch_version: str,
    supported: tuple[str, str] | None,
    wheels: Sequence[str],
    offered: Mapping[str, str],
) -> str:
    published = f"Python {supported[0]} to {supported[1]}" if supported else "its Pythons"
    index = f" and the wheel index (python_env_wheel_pythons) has {', '.join(wheels)}" if wheels else ""
    ranked = sorted(offered.items(), key=lambda item: _key(item[0]), reverse=True)
    would_fit = [f"{v} ({p})" for v, p in ranked if _fits(v, supported, wheels)]
    if pinned:
        what = f"python_env_python_version {pinned} is not among them"
    else:
        listed = ", ".join(f"{v} ({p})" for v, p in ranked) or "none known"
        what = f"{os_name}'s Pythons {listed} are not among them"
    if would_fit:
        fix = f"would fit: {', '.join(would_fit)}; set python_env_python_version to one or leave it empty"
    else:
        fix = (
            "install a fitting Python and set python_env_python_version and python_env_venv_python to it, "
            "or lock a PyTorch that publishes wheels for the OS's Python"
        )
    wheels_text = f"PyTorch {pytorch_version} publishes wheels for {published}{index}"
    return f"python_env on {host}: {wheels_text}; {what}: {fix}"


def load_facts() -> dict[str, Any]:
    """The role's facts (its vars/main.yml), for callers outside Ansible."""
    import yaml

    from gpuprov import resources

    path = resources.data_dir("roles") / "python_env" / "vars" / "main.yml"
    facts: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return facts


def host_problem(
    host: str,
    os_release: tuple[str, str],
    distribution: str,
    settings: Mapping[str, Any],
    facts: Mapping[str, Any] | None = None,
) -> str:
    """What `choose` refuses for a host before any host is touched: its /etc/os-release (ID, VERSION_ID),
    gpuprov's name of its OS ("Rocky"), and its variables (extra vars over the inventory's). "" when it fits
    or when a setting is still a template (the role decides then)."""
    os_id, version = os_release
    stack = settings.get("gpu_stack")
    values = [settings.get("python_env_python_version", ""), settings.get("python_env_wheel_pythons", [])]
    pytorch = stack.get("pytorch_version", "") if isinstance(stack, Mapping) else ""
    enabled = str(settings.get("python_env_pytorch", True)).lower() not in ("false", "no", "0", "off")
    if any("{{" in str(v) for v in (*values, pytorch)) or not isinstance(values[1], (list, tuple)):
        return ""
    major = version.split(".")[0]
    family = "RedHat" if os_id in EL_IDS else distribution
    choice = choose(
        host=host,
        os_name=f"{distribution} {version}",
        keys=os_keys(distribution, family, major),
        pinned=str(values[0] or ""),
        pytorch_version=str(pytorch) if enabled else "",
        wheel_pythons=[str(v) for v in values[1]],
        facts=facts if facts is not None else load_facts(),
        os_version=version,
    )
    return choice.problem
