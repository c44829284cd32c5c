"""python_env's pinned uv and the sandbox mirror's uv wheel are the same version, so a uv-managed venv can be
built from the mirror (the role installs exactly python_env_uv_version from the configured index)."""

import yaml

from gpuprov import resources
from gpuprov.sandbox import mirror


def role_defaults() -> dict[str, object]:
    return yaml.safe_load((resources.data_dir("roles") / "python_env" / "defaults" / "main.yml").read_text())


def test_the_mirror_carries_the_uv_the_role_pins():
    pinned = str(role_defaults()["python_env_uv_version"])
    assert pinned == mirror.UV_VERSION
    assert f"uv=={pinned}" in mirror.WHEELS.requirements


def test_pip_stays_the_default_venv_installer():
    defaults = role_defaults()
    assert defaults["python_env_venv_installer"] == "pip"
    assert defaults["python_env_uv_index_strategy"] == "first-index"
