"""python_env's index arguments, rendered by Ansible itself from the role's own tasks: PyTorch and its
dependencies come from PyTorch's index alone, the other packages from the site's indexes with torch pinned,
so no package's version is chosen across PyTorch's index and PyPI (pip merges the indexes it is given and
takes the highest version: pip's docs on --extra-index-url; CVE-2018-20225; the torchtriton package of
December 2022, pytorch.org/blog/compromised-nightly-dependency)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .plugins import role_task, run_plays

PYTORCH = "https://download.pytorch.org/whl/cu124"
MIRROR = "https://pypi.example.org/simple"


SCENARIOS: dict[str, dict[str, Any]] = {
    "pip mirror": {"python_env_pip_index_url": MIRROR, "python_env_pip_trusted_hosts": ["m"]},
    "pip extra": {"python_env_pip_extra_index_urls": ["https://extra.example.org/simple"]},
    "uv": {
        "__python_env_installer": "uv",
        "python_env_pytorch_index_url": "https://mirror.example.org/torch/cu124",
        "python_env_pip_index_url": MIRROR,
        "python_env_pip_extra_index_urls": ["https://extra.example.org/simple", MIRROR],
    },
    "offline, no pytorch": {
        "python_env_pip_no_index": True,
        "python_env_pip_find_links": ["/srv/wheels"],
        "python_env_pytorch": False,
    },
    "pytorch alone": {"python_env_pip_packages": []},
    "torchvision": {"python_env_pytorch_index_packages": ["torchvision==0.20.1"]},
}
BASE: dict[str, Any] = {
    "python_env_pytorch": True,
    "python_env_pytorch_version": "2.5.1",
    "python_env_pytorch_index_base": "https://download.pytorch.org/whl",
    "python_env_pytorch_index_url": "",
    "__python_env_wheel_tag": "cu124",
    "__python_env_installer": "pip",
    "python_env_pip_index_url": "",
    "python_env_pip_extra_index_urls": [],
    "python_env_pip_trusted_hosts": [],
    "python_env_pip_find_links": [],
    "python_env_pip_no_index": False,
    "python_env_pip_packages": ["numpy"],
    "python_env_pytorch_index_packages": [],
    "python_env_uv_index_strategy": "first-index",
    "python_env_path": "/opt/env",
    "python_env_uv_prefix": "/opt/uv",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The role's index decision and its install steps for each scenario, as Ansible renders them (one
    ansible-playbook run, a play per scenario)."""
    tmp = tmp_path_factory.mktemp("indexes")
    decide = role_task("python_env", "preflight.yml", "Decide which index each package comes from")
    install = role_task(
        "python_env", "build.yml", "Install PyTorch from its index, then the other packages from the site's"
    )
    steps = {
        "name": "Render the steps",
        "ansible.builtin.set_fact": {"steps": install["loop"]},
        "vars": install["vars"],
    }
    plays: list[dict[str, Any]] = []
    for number, settings in enumerate(SCENARIOS.values()):
        write = {
            "name": "Write what was decided",
            "ansible.builtin.copy": {
                "dest": str(tmp / f"{number}.json"),
                "content": "{{ {'torch': __python_env_torch_index_args, 'site': __python_env_site_index_args,"
                " 'uv_tool': __python_env_uv_tool_pip_args, 'steps': steps} | to_json }}",
                "mode": "0600",
            },
        }
        plays.append({"vars": {**BASE, **settings}, "tasks": [decide, steps, write]})
    run_plays(plays, tmp)
    return {name: json.loads((tmp / f"{n}.json").read_text()) for n, name in enumerate(SCENARIOS)}


def test_pip_takes_torch_from_pytorchs_index_alone_and_the_rest_from_the_site(
    rendered: dict[str, Any],
) -> None:
    got = rendered["pip mirror"]
    assert got["torch"] == ["--index-url", PYTORCH, "--trusted-host=m"]
    assert got["site"] == ["--index-url", MIRROR, "--trusted-host=m"]
    assert [s["packages"] for s in got["steps"]] == [["torch==2.5.1"], ["torch==2.5.1", "numpy"]]
    assert [s["args"] for s in got["steps"]] == [got["torch"], got["site"]]
    assert got["uv_tool"] == ["--index-url", MIRROR, "--trusted-host=m"]  # uv itself: a site package
    # the PyTorch step reads no pip configuration (an extra-index-url in /etc/pip.conf would be merged in:
    # pypa/pip#6394): --isolated, and PIP_CONFIG_FILE=/dev/null in the task's environment
    assert [s["isolated"] for s in got["steps"]] == [["--isolated"], []]


def test_no_step_names_both_indexes(rendered: dict[str, Any]) -> None:
    got = rendered["pip extra"]
    assert PYTORCH not in got["site"] and "https://extra.example.org/simple" not in got["torch"]
    assert got["site"] == ["--extra-index-url", "https://extra.example.org/simple"]


def test_uv_uses_one_default_index_per_step(rendered: dict[str, Any]) -> None:
    got = rendered["uv"]
    assert got["torch"] == [
        "--index-strategy", "first-index", "--default-index", "https://mirror.example.org/torch/cu124"
    ]  # fmt: skip
    extra = "https://extra.example.org/simple"
    assert got["site"] == ["--index-strategy", "first-index", "--index", extra, "--default-index", MIRROR]
    assert [s["isolated"] for s in got["steps"]] == [[], []]  # uv: --no-config on every step


def test_offline_sites_and_no_pytorch(rendered: dict[str, Any]) -> None:
    got = rendered["offline, no pytorch"]
    assert got["site"] == ["--no-index", "--find-links=/srv/wheels"]
    assert [s["packages"] for s in got["steps"]] == [["numpy"]]
    got = rendered["pytorch alone"]
    assert [s["packages"] for s in got["steps"]] == [["torch==2.5.1"]]


def test_torchvision_comes_from_pytorchs_index_and_stays(rendered: dict[str, Any]) -> None:
    got = rendered["torchvision"]
    assert [s["packages"] for s in got["steps"]] == [
        ["torch==2.5.1", "torchvision==0.20.1"],
        ["torch==2.5.1", "torchvision==0.20.1", "numpy"],
    ]
    assert [s["args"] for s in got["steps"]] == [got["torch"], got["site"]]
