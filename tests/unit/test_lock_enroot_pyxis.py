"""The lock pins enroot and pyxis for roles/slurm_pyxis: optional fields, checked for their form."""

from __future__ import annotations

import pytest

from gpuprov import lock
from gpuprov.sandbox.inventory import SANDBOX_LOCK


@pytest.mark.parametrize(("field", "good"), [("enroot_version", "4.1.2"), ("pyxis_version", "0.24.0")])
def test_enroot_and_pyxis_versions_are_optional_but_checked(field: str, good: str) -> None:
    assert field not in SANDBOX_LOCK
    assert lock.check({**SANDBOX_LOCK, field: good}) == []
    problems = lock.check({**SANDBOX_LOCK, field: "v" + good})
    assert problems == [f"gpu_stack.{field} is 'v{good}': it must be {lock.OPTIONAL_FIELDS[field][1]}"]
