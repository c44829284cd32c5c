"""`gpuprov bootstrap`'s drift check on node1 and node2 of the Debian sandbox that first_bootstrap made ready
(the real site.yml, whose roles write their manifests; that run left each host's record).

Runs in the file order right after first_bootstrap: a re-run finds no drift and starts no Ansible; a changed
/etc/nccl.conf on node1, and on node2 a changed sysctl file, an unheld driver package and a removed profile
script, are found, named and repaired by one run limited to those roles; then nothing is left to do.
test_site.py's second run shows that a changed lock file runs every role.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.bootstrap.conftest import bootstrap, on_node
from tests.integration.conftest import BootstrapRun, Sandbox

pytestmark = pytest.mark.integration
LIMIT = ("--limit", "node1,node2")
NCCL_CONF = "/etc/nccl.conf"  # network_tuning_nccl_conf_file's default
DRIVER_PACKAGE = "nvidia-driver-cuda"  # the debian12 nodes' driver package (test_site.py)
SYSCTL_FILE = "/etc/sysctl.d/90-gpuprov-network.conf"  # network_tuning_sysctl_file's default
PROFILE_SCRIPT = "/etc/profile.d/cuda.sh"  # the cuda role's


def no_ansible_run(sandbox: Sandbox) -> dict[str, object]:
    result = bootstrap(sandbox, *LIMIT, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # --json prints the summary, as summary.json keeps it
    drift = summary["drift"]
    assert drift["ansible_run"] is False, drift
    assert summary["ansible_rc"] is None and summary["status"] == "ok"
    assert {name: (host["status"], host["changed"]) for name, host in summary["hosts"].items()} == {
        "node1": ("ok", 0),
        "node2": ("ok", 0),
    }
    assert "No drift on 2 host(s) (" in result.stderr and "nothing to apply, changed=0" in result.stderr
    assert all(check["items_checked"] > 20 for check in drift["checked"].values()), drift
    return summary


def test_a_rerun_without_drift_starts_no_ansible(deb_sandbox: Sandbox, first_bootstrap: BootstrapRun) -> None:
    assert first_bootstrap.returncode == 0, first_bootstrap.stderr
    summary = no_ansible_run(deb_sandbox)
    # lock diff and upgrade read the newest run's verified versions: the ones the first run verified
    assert summary["versions"] == first_bootstrap.summary["versions"]


def test_drift_is_named_and_repaired_by_one_run_of_the_drifted_roles(
    deb_sandbox: Sandbox, first_bootstrap: BootstrapRun
) -> None:
    conf_before = on_node(deb_sandbox, "node1", f"cat {NCCL_CONF}").stdout
    sysctl_before = on_node(deb_sandbox, "node2", f"cat {SYSCTL_FILE}").stdout
    assert "net.core.rmem_max" in sysctl_before
    assert on_node(deb_sandbox, "node1", f"echo NCCL_DEBUG=TRACE >> {NCCL_CONF}").returncode == 0
    drift = (
        f"sed -i 's/^net.core.rmem_max.*/net.core.rmem_max = 212992/' {SYSCTL_FILE}"
        f" && apt-mark unhold {DRIVER_PACKAGE} && rm {PROFILE_SCRIPT}"
    )
    assert on_node(deb_sandbox, "node2", drift).returncode == 0

    result = bootstrap(deb_sandbox, *LIMIT, "--json")
    assert result.returncode == 0, result.stderr
    assert f"node1: network_tuning: files {NCCL_CONF} changed" in result.stderr
    assert f"node2: nvidia_driver: packages {DRIVER_PACKAGE} changed" in result.stderr
    assert f"node2: network_tuning: files {SYSCTL_FILE} changed" in result.stderr
    assert f"node2: cuda: files {PROFILE_SCRIPT} is absent" in result.stderr
    summary = result.summary()
    assert summary["tags"] == ["cuda", "network_tuning", "nvidia_driver"], summary["drift"]
    assert summary["drift"]["checked"]["node1"]["drifted"] == {
        "network_tuning": [f"files {NCCL_CONF} changed"]
    }
    assert all(host["changed"] > 0 for host in summary["hosts"].values()), summary["hosts"]
    assert on_node(deb_sandbox, "node1", f"cat {NCCL_CONF}").stdout == conf_before
    assert DRIVER_PACKAGE in on_node(deb_sandbox, "node2", "apt-mark showhold").stdout.split()
    assert on_node(deb_sandbox, "node2", f"cat {SYSCTL_FILE}").stdout == sysctl_before
    assert on_node(deb_sandbox, "node2", f"test -s {PROFILE_SCRIPT}").returncode == 0

    no_ansible_run(deb_sandbox)  # the repair was recorded: nothing left to do
