"""python_env's choice of the environment's Python (gpuprov.python_fit), from the role's recorded facts."""

from __future__ import annotations

from types import ModuleType

import pytest
import yaml

from gpuprov import python_fit, resources
from gpuprov.python_fit import Choice
from tests.unit.roles.plugins import role_plugin

COMPAT = resources.data_dir("playbooks") / "vars" / "gpu_stack_compat.yml"
FACTS = python_fit.load_facts()


def _choose(
    keys: list[str], pytorch: str, pinned: str = "", wheels: tuple[str, ...] = ()
) -> python_fit.Choice:
    return python_fit.choose(
        host="h1", os_name="Rocky 9.4", keys=keys, pinned=pinned, pytorch_version=pytorch,
        wheel_pythons=list(wheels), facts=FACTS,
    )  # fmt: skip


def _plugin() -> ModuleType:
    return role_plugin("python_env", "python_choice.py")


def test_el9_takes_appstreams_newest_python_the_locked_pytorch_supports() -> None:
    # PyTorch 2.13: Python 3.10 to 3.15; EL 9: python3 is 3.9, AppStream adds 3.11 and 3.12.
    assert _choose(["Rocky-9", "RedHat-9"], "2.13.0") == Choice("3.12", "python3.12", "")


def test_el8_takes_python39_for_a_pytorch_that_stops_at_it() -> None:
    # PyTorch 2.0: Python 3.8 to 3.11: EL 8's 3.11 (AppStream since 8.8); 2.5 with wheels to 3.12 takes 3.12.
    assert _choose(["Rocky-8", "RedHat-8"], "2.0.1").version == "3.11"
    assert _choose(["RedHat-8", "RedHat-8"], "2.5.1") == Choice("3.12", "python3.12", "")


def test_a_partial_wheel_index_narrows_the_choice() -> None:
    # The sandbox's wheel index holds cp311 only.
    assert _choose(["Rocky-9", "RedHat-9"], "2.13.0", wheels=("3.11",)) == Choice("3.11", "python3.11", "")


def test_a_pinned_python_outside_pytorchs_range_is_refused_naming_what_fits() -> None:
    choice = _choose(["Rocky-9", "RedHat-9"], "2.13.0", pinned="3.9")
    assert choice.version == ""
    assert choice.problem == (
        "python_env on h1: PyTorch 2.13.0 publishes wheels for Python 3.10 to 3.15; "
        "python_env_python_version 3.9 is not among them: would fit: 3.12 (python3.12), 3.11 (python3.11); "
        "set python_env_python_version to one or leave it empty"
    )


def test_an_os_with_no_fitting_python_is_refused() -> None:
    # Ubuntu 20.04's python3 is 3.8; PyTorch 2.5 and later have no cp38 wheels.
    choice = _choose(["Ubuntu-20", "Debian-20"], "2.5.1")
    assert choice.version == ""
    assert choice.problem.startswith(
        "python_env on h1: PyTorch 2.5.1 publishes wheels for Python 3.9 to 3.12; "
    )
    assert "Pythons 3.8 (python3) are not among them: install a fitting Python" in choice.problem


def test_no_pytorch_keeps_the_os_python_or_the_pinned_one() -> None:
    assert _choose(["Rocky-9", "RedHat-9"], "").version == "3.12"
    assert _choose(["Debian-12", "Debian-12"], "").version == "3.11"
    assert _choose(["Debian-12", "Debian-12"], "", pinned="3.13").version == "3.13"


def test_a_pytorch_newer_than_the_table_takes_the_newest_row_below() -> None:
    assert python_fit.pytorch_range("2.99.0", FACTS[python_fit.PYTORCH_PYTHONS]) == ("3.10", "3.15")
    assert python_fit.pytorch_range("1.0.0", FACTS[python_fit.PYTORCH_PYTHONS]) is None


def test_every_pytorch_of_the_compatibility_table_has_its_python_row() -> None:
    rows = yaml.safe_load(COMPAT.read_text())["gpu_stack_compat"]["pytorch"]
    minors = {".".join(str(r["version"]).split(".")[:2]) for r in rows}
    assert minors <= set(FACTS[python_fit.PYTORCH_PYTHONS])


T213, T25 = {"gpu_stack": {"pytorch_version": "2.13.0"}}, {"gpu_stack": {"pytorch_version": "2.5.1"}}
ROCKY, FOCAL = ("rocky", "9.4"), ("ubuntu", "20.04")


@pytest.mark.parametrize(
    ("os_release", "distribution", "settings", "fits"),
    [
        (ROCKY, "Rocky", T213, True),
        (ROCKY, "Rocky", {**T213, "python_env_python_version": "3.9"}, False),
        (ROCKY, "Rocky", {**T213, "python_env_wheel_pythons": ["3.10"]}, False),
        (FOCAL, "Ubuntu", T25, False),
        (FOCAL, "Ubuntu", {**T25, "python_env_pytorch": False}, True),
        (FOCAL, "Ubuntu", {**T25, "python_env_python_version": "{{ x }}"}, True),
        (("debian", "12"), "Debian", T213, True),
    ],
)
def test_the_preflight_refuses_the_same_hosts(
    os_release: tuple[str, str], distribution: str, settings: dict[str, object], fits: bool
) -> None:
    message = python_fit.host_problem("h1", os_release, distribution, settings)
    assert (message == "") is fits, message


def test_the_role_filter_gives_the_same_choice_from_ansible_facts() -> None:
    facts = {"distribution": "Rocky", "os_family": "RedHat", "distribution_major_version": "9",
             "distribution_version": "9.4"}  # fmt: skip
    assert _plugin().python_env_choice(FACTS, "h1", facts, "", "2.13.0", ["3.11"]) == {
        "version": "3.11",
        "package": "python3.11",
        "problem": "",
    }


@pytest.mark.parametrize(
    ("os_version", "chosen"),
    [("9.4", "3.12"), ("9.3", "3.11"), ("9.2", "3.11"), ("9.1", ""), ("9", "3.12")],
)
def test_el_offers_only_the_pythons_of_its_minor_release(os_version: str, chosen: str) -> None:
    """python3.11 arrived in RHEL 9.2, python3.12 in 9.4 (RHEL 9 "Installing and using dynamic programming
    languages", Table 1.1): Rocky 9.3's AppStream has no python3.12. A version without a minor (CentOS
    Stream's "9") offers every one."""
    choice = python_fit.choose(
        host="h1", os_name=f"Rocky {os_version}", keys=["Rocky-9", "RedHat-9"], pinned="",
        pytorch_version="2.13.0", wheel_pythons=[], facts=FACTS, os_version=os_version,
    )  # fmt: skip
    assert choice.version == chosen
    if not chosen:  # 9.1: python3 3.9 only, and PyTorch 2.13 needs 3.10 or newer
        assert "Rocky 9.1's Pythons 3.9 (python3) are not among them" in choice.problem
