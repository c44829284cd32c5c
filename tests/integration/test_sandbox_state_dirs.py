"""A sandbox belongs to the state dir that made it: `up` from another one must not take its nodes over."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import gpuprov, start_sandbox, unique_name

pytestmark = pytest.mark.integration


def test_up_from_another_state_dir_is_refused_and_leaves_the_first_one_working(
    sandbox_env: dict[str, str], tmp_path: Path
) -> None:
    sandbox = start_sandbox(unique_name("state"), sandbox_env, "--nodes", "1")
    other_state = tmp_path / "other-state"
    other_env = {**sandbox_env, "GPUPROV_STATE_DIR": str(other_state)}
    try:
        key_before = (sandbox.inventory.parent / "id_ed25519.pub").read_text()
        proc = gpuprov("sandbox", "up", "--name", sandbox.name, "--nodes", "1", env=other_env, check=False)
        assert proc.returncode == 4, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        first_state = Path(sandbox_env["GPUPROV_STATE_DIR"]).resolve() / "sandboxes" / sandbox.name
        assert lines[0] == (
            f"error: sandbox '{sandbox.name}' exists but was made from another state dir ({first_state}), "
            "which holds its login key and inventory; run this with that GPUPROV_STATE_DIR, or choose "
            f"another --name (`gpuprov sandbox down --name {sandbox.name}` removes it for everyone)"
        )
        assert "nothing to change" not in proc.stderr
        assert not (other_state / "sandboxes" / sandbox.name).exists()
        # The node still accepts the first state dir's key, and nothing else was written to it.
        authorized = sandbox.ansible(
            "node1", "-m", "ansible.builtin.command", "-a", "cat .ssh/authorized_keys"
        )
        assert key_before.strip() in authorized.stdout
        assert "SUCCESS" in sandbox.ansible("gpu_nodes", "-m", "ansible.builtin.ping", "-o").stdout
        # Its own state dir still adopts it: nothing to change.
        again = sandbox.gpuprov("sandbox", "up")
        assert "nothing to change" in again.stderr
    finally:
        gpuprov("sandbox", "down", "--name", sandbox.name, env=sandbox_env, check=False)
