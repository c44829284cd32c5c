"""Preflight against real sandbox nodes: hosts that cannot be used are refused before Ansible starts.

Every case runs the real `gpuprov bootstrap` (real site.yml) and checks that nothing reached any host:
runner never started (the run directory has no Ansible log) and no file the roles write exists.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from gpuprov import hosts, ssh
from tests.integration.bootstrap.conftest import LOCK, ROLE_FILE, Result, bootstrap, latest_run, on_node
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration
NODES = ("node1", "node2", "node3")


def variant(sandbox: Sandbox, tmp_path: Path, edit: str, extra_hosts: str = "") -> Path:
    """A copy of the sandbox inventory with one setting replaced (`key=value`) and hosts added."""
    text = sandbox.inventory.read_text()
    key = edit.split("=", 1)[0]
    text = re.sub(rf"^{key}=.*$", edit, text, flags=re.MULTILINE) if edit else text
    if extra_hosts:
        text = text.replace("[gpu_nodes]\n", f"[gpu_nodes]\n{extra_hosts}\n", 1)
    path = tmp_path / "inventory.ini"
    path.write_text(text)
    return path


def snapshot(sandbox: Sandbox) -> dict[str, str]:
    """What the roles (or the test playbook) leave on each node: files with their times, and packages."""
    look = f"ls -la --time-style=full-iso {ROLE_FILE} /etc/gpuprov-test 2>&1; dpkg -l | md5sum"
    return {node: on_node(sandbox, node, look).stdout for node in NODES}


def assert_nothing_applied(sandbox: Sandbox, result: Result, before: dict[str, str]) -> None:
    run = latest_run(result.state_dir)
    assert not (run / "stdout").exists(), "ansible-runner started"
    assert (run / "summary.json").is_file()
    assert result.summary()["status"] == "preflight_failed"
    assert snapshot(sandbox) == before


def test_unreachable_host(deb_sandbox: Sandbox, tmp_path: Path) -> None:
    address = hosts.load(deb_sandbox.inventory).hosts[0].address
    ghost = ".".join([*address.split(".")[:3], "250"])  # in the sandbox network, no container there
    inventory = variant(deb_sandbox, tmp_path, "", extra_hosts=f"ghost ansible_host={ghost}")
    before = snapshot(deb_sandbox)
    result = bootstrap(deb_sandbox, "-e", f"@{LOCK}", inventory=inventory)
    assert result.returncode == 6, result.stderr
    assert result.error_lines() == [
        f"error: ghost ({ghost}:22): cannot connect over SSH: {result.error_lines()[0].split('SSH: ', 1)[1]}"
    ]
    assert "nothing was applied to any host" in result.stderr
    assert_nothing_applied(deb_sandbox, result, before)


def test_unknown_host_key(deb_sandbox: Sandbox, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    inventory = variant(deb_sandbox, tmp_path, f"gpuprov_known_hosts_file={empty}")
    before = snapshot(deb_sandbox)
    result = bootstrap(deb_sandbox, "-e", f"@{LOCK}", "--limit", "node1", inventory=inventory)
    assert result.returncode == 7, result.stderr
    (line,) = result.error_lines()
    address = hosts.load(deb_sandbox.inventory).host("node1").address
    assert f"node1 ({address}:22): host key unknown: the server offers ssh-ed25519 SHA256:" in line
    assert f"run: ssh-keyscan -p 22 -t ed25519 {address} >> {empty}" in line
    assert len(result.stderr.strip().splitlines()) == 2  # the step line, then the one error line
    assert_nothing_applied(deb_sandbox, result, before)


def test_changed_host_key_and_refused_user_key_reported_together(
    deb_sandbox: Sandbox, tmp_path: Path
) -> None:
    """node1's address listed with node2's host key (a changed key), and a user the nodes do not know."""
    loaded = hosts.load(deb_sandbox.inventory)
    real = loaded.hosts[0].known_hosts.read_text().splitlines()
    node1, node2 = loaded.host("node1").address, loaded.host("node2").address
    key_of = {line.split()[0]: " ".join(line.split()[1:]) for line in real}
    swapped = tmp_path / "known_hosts"
    swapped.write_text(f"{node1} {key_of[node2]}\n{node2} {key_of[node2]}\n" + "\n".join(real[2:]) + "\n")
    inventory = variant(deb_sandbox, tmp_path, f"gpuprov_known_hosts_file={swapped}")
    inventory.write_text(
        inventory.read_text().replace("node3 ansible_host=", "node3 ansible_user=nobody ansible_host=")
    )
    before = snapshot(deb_sandbox)
    result = bootstrap(deb_sandbox, "-e", f"@{LOCK}", inventory=inventory)
    assert result.returncode == 6, result.stderr  # an unreachable host (refused key) decides the code
    flat = " ".join(result.stderr.split())
    assert "host key CHANGED" in flat
    assert "refused" in flat and "for user nobody" in flat
    assert "preflight found 2 problems (node1, node3)" in flat
    problems = result.summary()["preflight"]["hosts"]
    assert [p["check"] for p in problems["node1"]["problems"]] == ["host key"]
    assert problems["node2"]["problems"] == []
    assert [p["check"] for p in problems["node3"]["problems"]] == ["ssh"]
    assert_nothing_applied(deb_sandbox, result, before)


def test_lock_that_does_not_fit(deb_sandbox: Sandbox, tmp_path: Path) -> None:
    lock = tmp_path / "lock.yml"
    lock.write_text(LOCK.read_text().replace('driver_branch: "580"', 'driver_branch: "535"').replace(
        'driver_version: "580.126.09"', 'driver_version: "535.216.03"'
    ).replace('cuda_version: "12.4.1"', 'cuda_version: "12.8.1"'))  # fmt: skip
    before = snapshot(deb_sandbox)
    result = bootstrap(deb_sandbox, "-e", f"@{lock}")
    assert result.returncode == 2, result.stderr
    assert "(lock: all hosts)" in result.stderr and "nothing was applied to any host" in result.stderr
    assert_nothing_applied(deb_sandbox, result, before)


def test_missing_lock(deb_sandbox: Sandbox, tmp_path: Path) -> None:
    # The sandbox's inventory has a lock in its group_vars/; a copy of the inventory file alone has none.
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(Path(deb_sandbox.inventory).read_text())
    before = snapshot(deb_sandbox)
    result = bootstrap(deb_sandbox, inventory=inventory)
    assert result.returncode == 2, result.stderr
    assert result.error_lines() == [
        "error: (lock: all hosts): gpu_stack is not set; copy inventory/sample/group_vars/all/gpu_stack.yml "
        "into the inventory's group_vars/all/ or pass it with -e @FILE; nothing was applied to any host"
    ]
    assert_nothing_applied(deb_sandbox, result, before)


def test_connect_checks_host_keys(deb_sandbox: Sandbox, tmp_path: Path) -> None:
    """gpuprov.ssh.connect itself: a session with the right key; refusals with fingerprints otherwise."""
    node1 = hosts.load(deb_sandbox.inventory).host("node1")
    client = ssh.connect(node1, timeout=10)
    try:
        assert ssh.run(client, "id -un", timeout=10) == ssh.Result(0, "gpuprov\n", "")
        assert ssh.run(client, "cat; exit 3", timeout=10, stdin=b"in") == ssh.Result(3, "in", "")
        with client.open_sftp() as sftp:
            local = tmp_path / "sent"
            local.write_bytes(b"payload")
            ssh.put(sftp, local, "/tmp/gpuprov-ssh-test", 0o640)
            assert oct(sftp.stat("/tmp/gpuprov-ssh-test").st_mode or 0)[-3:] == "640"
            ssh.get(sftp, "/tmp/gpuprov-ssh-test", tmp_path / "back")
            assert (tmp_path / "back").read_bytes() == b"payload"
            ssh.put_bytes(sftp, b"bytes", "/tmp/gpuprov-ssh-test", 0o600)
            assert ssh.run(client, "cat /tmp/gpuprov-ssh-test; rm /tmp/gpuprov-ssh-test").stdout == "bytes"
            with pytest.raises(ssh.SessionLost, match="copying /nonexistent/x to"):
                ssh.get(sftp, "/nonexistent/x", tmp_path / "x")
    finally:
        client.close()
    with pytest.raises(ssh.SessionLost, match=r"^SSH command failed \(EOFError: the connection is closed\)$"):
        ssh.run(client, "true")

    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(
        ssh.HostKeyProblem, match=r"host key unknown: the server offers ssh-ed25519 SHA256:\S+"
    ):
        ssh.connect(dataclasses.replace(node1, known_hosts=empty), timeout=10)
    with pytest.raises(ssh.Unreachable, match=r"the server refused .* for user root"):
        ssh.connect(dataclasses.replace(node1, user="root"), timeout=10)
