"""One rocky9 STAND-IN node (Debian's dnf and rpm reporting Rocky 9) for nvidia_driver's RHEL path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuprov import resources
from tests.integration.conftest import Sandbox, gpuprov, start_sandbox, unique_name


@pytest.fixture(scope="module")
def rocky(sandbox_env: dict[str, str]) -> Iterator[Sandbox]:
    env = {**sandbox_env, "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles")), "ANSIBLE_PIPELINING": "1"}
    sandbox = start_sandbox(unique_name("drvel"), env, "--nodes", "1", "--os", "rocky9")
    yield sandbox
    gpuprov("sandbox", "down", "--name", sandbox.name, env=env, check=False)
