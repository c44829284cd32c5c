"""Every role's README documents exactly its defaults: the yaml blocks of its "Role variables" section
load to the same mapping as defaults/main.yml."""

import re
from pathlib import Path

import pytest
import yaml

from gpuprov import resources

ROLES = sorted(p for p in resources.data_dir("roles").iterdir() if (p / "defaults" / "main.yml").is_file())


def documented_variables(readme: str) -> dict[str, object]:
    match = re.search(r"^## Role variables\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    assert match, "no '## Role variables' section"
    documented: dict[str, object] = {}
    for block in re.findall(r"^```yaml\n(.*?)^```", match.group(1), re.S | re.M):
        documented.update(yaml.safe_load(block) or {})
    return documented


def test_there_are_roles_to_check():
    assert {"nvidia_driver", "cuda", "cudnn", "nccl"} <= {p.name for p in ROLES}


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_readme_variables_mirror_defaults(role: Path):
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    readme = role / "README.md"
    assert readme.is_file(), f"{role.name} has no README.md"
    assert documented_variables(readme.read_text()) == defaults


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_public_variables_carry_the_role_prefix(role: Path):
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    assert [name for name in defaults if not name.startswith(f"{role.name}_")] == []


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_meta_lists_platforms(role: Path):
    meta = yaml.safe_load((role / "meta" / "main.yml").read_text())
    assert meta["galaxy_info"]["platforms"], role.name
