"""`gpuprov bootstrap` with the real playbooks/site.yml and roles on sandbox nodes (the expensive part: each
bootstrap is done once and checked from several sides).

Stand-ins: the ubuntu22.04 and rocky9 nodes are Debian systems that report those OSes, and the NVIDIA packages
come from the sandbox mirror (see docs/stand-ins.md).
"""

from __future__ import annotations

import pytest

from tests.integration.bootstrap.conftest import ROLE_FILE, bootstrap, bootstrap_interrupted, on_node
from tests.integration.conftest import BootstrapRun, Sandbox

pytestmark = pytest.mark.integration
DRIVER_PACKAGE = "nvidia-driver-cuda"  # the debian12 nodes: Debian's name, the lock picks the version


def installed(sandbox: Sandbox, node: str, package: str) -> bool:
    status = on_node(sandbox, node, f"dpkg-query -W -f '${{Status}}' {package}").stdout
    return status.endswith("ok installed")  # "hold ok installed" once the role has held it


def test_check_mode_on_a_fresh_host(deb_sandbox: Sandbox) -> None:
    result = bootstrap(deb_sandbox, "--limit", "node3", "--check")
    assert result.returncode == 0, result.stderr
    summary = result.summary()
    assert summary["check"] is True and list(summary["hosts"]) == ["node3"]
    assert summary["hosts"]["node3"]["failed"] == 0
    assert summary["hosts"]["node3"]["changed"] > 0  # it would change things...
    assert on_node(deb_sandbox, "node3", f"test -e {ROLE_FILE}").returncode != 0  # ...but did not
    assert not installed(deb_sandbox, "node3", DRIVER_PACKAGE)


def test_bootstrap_two_nodes_with_limit(deb_sandbox: Sandbox, first_bootstrap: BootstrapRun) -> None:
    result = first_bootstrap  # shared with the launch tests, which run jobs on these two nodes
    assert result.returncode == 0, result.stderr
    summary = result.summary
    assert sorted(summary["hosts"]) == ["node1", "node2"]
    for node in ("node1", "node2"):
        host = summary["hosts"][node]
        assert (host["failed"], host["unreachable"]) == (0, 0)
        assert host["changed"] > 0
        assert installed(deb_sandbox, node, DRIVER_PACKAGE)
    assert not installed(deb_sandbox, "node3", DRIVER_PACKAGE)  # outside --limit: untouched


def test_second_run_changes_nothing(deb_sandbox: Sandbox, first_bootstrap: BootstrapRun) -> None:
    """A changed lock file (a comment added) is a changed input: the drift check runs every role on every
    host, and Ansible's own run changes nothing."""
    lock = deb_sandbox.inventory.parent / "group_vars" / "all" / "gpu_stack.yml"
    text = lock.read_text()
    lock.write_text(text + "# a comment: the file changed, what it says did not\n")
    try:
        result = bootstrap(deb_sandbox, "--limit", "node1,node2", "--json")
    finally:
        lock.write_text(text)
    assert result.returncode == 0, result.stderr
    summary = result.summary()
    assert summary["ansible_rc"] == 0 and summary["tags"] == [], summary.get("drift")
    for node, host in summary["hosts"].items():
        assert host["changed"] == 0, f"{node}: {host}"
        assert host["status"] == "ok"
        assert summary["drift"]["checked"][node]["full_run"].startswith("the inputs changed"), summary[
            "drift"
        ]


def test_the_roles_publish_what_they_verified(first_bootstrap: BootstrapRun) -> None:
    """The end-of-run table and summary.json show what each role read back (the sandbox's lock; no GPU, so
    the driver is the installed package's version)."""
    from gpuprov.sandbox.inventory import SANDBOX_LOCK

    for node in ("node1", "node2"):
        versions = first_bootstrap.summary["hosts"][node]["versions"]
        assert versions == {
            "driver": SANDBOX_LOCK["driver_version"],
            "cuda": SANDBOX_LOCK["cuda_version"],
            "cudnn": SANDBOX_LOCK["cudnn_version"],
            "nccl": SANDBOX_LOCK["nccl_version"] + "+cuda" + SANDBOX_LOCK["cuda_version"].rsplit(".", 1)[0],
            "python": versions["python"],  # the node's Debian 12 python3, checked below
            "pytorch": SANDBOX_LOCK["pytorch_version"] + "+cpu",
        }, node
        assert versions["python"].startswith("3.11."), versions
        assert first_bootstrap.summary["versions"][node] == versions
    assert "Versions verified by the roles" in first_bootstrap.stderr  # the end-of-run table


def test_mixed_inventory_interrupted_then_bootstrapped(boot_mixed_sandbox: Sandbox) -> None:
    """debian12 + ubuntu22.04 + rocky9 stand-ins: Ctrl-C once the roles are changing hosts, then run again."""
    interrupted = bootstrap_interrupted(boot_mixed_sandbox, when=": changed: ")
    assert interrupted.returncode == 130, interrupted.stderr
    assert interrupted.error_lines()[-1].startswith("error: interrupted: Ansible was stopped")
    assert interrupted.summary()["status"] == "interrupted"

    result = bootstrap(boot_mixed_sandbox)
    assert result.returncode == 0, result.stderr
    hosts = result.summary()["hosts"]
    assert len(hosts) == 3
    for node, host in hosts.items():
        assert (host["failed"], host["unreachable"]) == (0, 0), f"{node}: {host}"
    systems = sorted(h["os"] for h in result.summary()["preflight"]["hosts"].values())
    assert [s.split()[0] for s in systems] == ["Debian", "Rocky", "Ubuntu"]
