"""One single-node sandbox (debian12) for the python_env and network_tuning tests of this folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuprov import resources
from tests.integration.conftest import Sandbox, gpuprov, start_sandbox, unique_name


@pytest.fixture(scope="module")
def node(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    env = {**sandbox_env, "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles")), "ANSIBLE_PIPELINING": "1"}
    sandbox = start_sandbox(unique_name("netpy"), env, "--nodes", "1", "--os", "debian12")
    yield sandbox
    gpuprov("sandbox", "down", "--name", sandbox.name, env=env, check=False)
