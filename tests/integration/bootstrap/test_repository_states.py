"""nvidia_repository converges from the repository states a host can be left in (issue 25 item 9), on the
session's mixed sandbox (debian12, ubuntu22.04 and rocky9 stand-ins), the role alone
(playbooks/repository.yml):

- the issue's host: gpuprov's entry, then NVIDIA's guide (the mirror's stand-in cuda-keyring, `dpkg -i`; on
  rocky9 the mirror's cuda-rhel9.repo where `dnf config-manager --add-repo` puts it): apt fails with
  "Conflicting values set for option Signed-By" until the role adopts cuda-keyring's verified entry; dnf has
  the repository twice until the role comments NVIDIA's file out;
- hand-written entries that would lower verification (trusted=yes, no Signed-By, another key; on rocky9 the
  same repository id and the same baseurl with gpgcheck=0) beside gpuprov's earlier one-line entry: all
  disabled, gpuprov's verified entry the only one.

Each: converge, apt-get update / dnf makecache work, a second run changes nothing. The nodes are left with
no NVIDIA entries (other tests share the sandbox).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuprov.sandbox.standins.keyring import SANDBOX_REPOS_URL
from tests.integration.bootstrap.conftest import HERE, LOCK, bootstrap, on_node
from tests.integration.conftest import Sandbox

pytestmark = pytest.mark.integration
PLAYBOOK = HERE / "playbooks" / "repository.yml"
APT_NODES = {"node1": "debian12", "node2": "ubuntu2204"}
DNF_NODE = "node3"
LISTS = "/etc/apt/sources.list.d"
CLEAN_APT = (
    "dpkg --purge cuda-keyring >/dev/null 2>&1;"
    f" rm -f {LISTS}/nvidia-cuda.* {LISTS}/hand.* {LISTS}/cuda-*.list /etc/apt/preferences.d/nvidia-cuda"
    " /usr/share/keyrings/nvidia-cuda-archive-keyring.asc"
)
CLEAN_DNF = (
    "rm -f /etc/yum.repos.d/nvidia-cuda.repo /etc/yum.repos.d/cuda-rhel9.repo /etc/yum.repos.d/hand.repo"
)


def sh(sandbox: Sandbox, node: str, script: str) -> str:
    result = on_node(sandbox, node, script)
    assert result.returncode == 0, f"{node}: {script}\n{result.stdout}{result.stderr}"
    return result.stdout


def fetch(url: str, dest: str) -> str:
    return f'python3 -c \'import urllib.request as u; u.urlretrieve("{url}", "{dest}")\''


def clean(sandbox: Sandbox) -> None:
    for node in APT_NODES:
        sh(sandbox, node, CLEAN_APT)
    sh(sandbox, DNF_NODE, CLEAN_DNF)


@pytest.fixture
def nodes(mixed_sandbox: Sandbox) -> Iterator[Sandbox]:
    clean(mixed_sandbox)
    yield mixed_sandbox
    clean(mixed_sandbox)
    for node in APT_NODES:
        sh(mixed_sandbox, node, "apt-get update -q")


def run_role(sandbox: Sandbox, *args: str) -> dict[str, dict[str, int]]:
    result = bootstrap(sandbox, "-e", f"@{LOCK}", "--json", "--full", *args, playbook=PLAYBOOK)
    assert result.returncode == 0, result.stderr[-3000:]
    hosts: dict[str, dict[str, int]] = result.summary()["hosts"]
    assert all(host["failed"] == 0 for host in hosts.values()), hosts
    return hosts


def active_apt_entries(sandbox: Sandbox, node: str) -> list[str]:
    """The files of the entries apt itself reads for the repository (indextargets' Sourcesentry)."""
    url = f"{SANDBOX_REPOS_URL}/{APT_NODES[node]}/x86_64/"
    listing = sh(sandbox, node, "apt-get indextargets --format '$(REPO_URI) $(SOURCESENTRY)'")
    return sorted(
        {line.split()[1].rsplit(":", 1)[0] for line in listing.splitlines() if line.startswith(url)}
    )


def assert_apt_works(sandbox: Sandbox, node: str) -> None:
    update = on_node(sandbox, node, "apt-get update -q 2>&1")
    # apt warns "Target Packages (...) is configured multiple times" for two entries of one repository.
    assert update.returncode == 0 and "E:" not in update.stdout, update.stdout
    assert "configured multiple times" not in update.stdout, update.stdout


def dnf_repo_ids(sandbox: Sandbox, node: str) -> list[str]:
    """The enabled repository ids, dnf's own view of the .repo files."""
    listing = on_node(sandbox, node, "dnf repolist --enabled")
    assert listing.returncode == 0, listing.stdout + listing.stderr
    return sorted(line.split()[0] for line in listing.stdout.splitlines()[1:] if line.strip())


def test_bootstrapped_host_that_then_got_cuda_keyring_converges(nodes: Sandbox) -> None:
    run_role(nodes)  # the host as gpuprov left it
    for node, repo in APT_NODES.items():
        deb = f"{SANDBOX_REPOS_URL}/{repo}/x86_64/cuda-keyring_1.1-1_all.deb"
        sh(nodes, node, f"{fetch(deb, '/tmp/cuda-keyring.deb')} && dpkg -i /tmp/cuda-keyring.deb")
        broken = on_node(nodes, node, "apt-get update -q 2>&1")
        assert broken.returncode != 0 and "Conflicting values set for option Signed-By" in broken.stdout
    repo_file = f"{SANDBOX_REPOS_URL}/rhel9/x86_64/cuda-rhel9.repo"
    sh(nodes, DNF_NODE, fetch(repo_file, "/etc/yum.repos.d/cuda-rhel9.repo"))
    assert {"cuda-rhel9-x86_64", "nvidia-cuda"} <= set(dnf_repo_ids(nodes, DNF_NODE))

    # --check on the broken hosts: reports the change, writes nothing (apt still refuses its sources).
    before = sh(nodes, "node1", f"ls {LISTS}; md5sum {LISTS}/*")
    predicted = run_role(nodes, "--check")
    assert all(predicted[node]["changed"] for node in [*APT_NODES, DNF_NODE]), predicted
    assert sh(nodes, "node1", f"ls {LISTS}; md5sum {LISTS}/*") == before

    first = run_role(nodes)
    assert all(first[node]["changed"] for node in [*APT_NODES, DNF_NODE]), first
    for node, repo in APT_NODES.items():
        assert_apt_works(nodes, node)
        # cuda-keyring's entry (its keyring holds exactly the verified key) is the one; gpuprov's is gone.
        assert active_apt_entries(nodes, node) == [f"{LISTS}/cuda-{repo}-x86_64.list"]
    ids = dnf_repo_ids(nodes, DNF_NODE)
    assert "cuda-rhel9-x86_64" not in ids and ids.count("nvidia-cuda") == 1, ids
    sh(nodes, DNF_NODE, "dnf -y -q makecache")  # -y: accept the metadata key the role wrote (repo_gpgcheck)

    again = run_role(nodes)
    assert {node: host["changed"] for node, host in again.items()} == dict.fromkeys(again, 0), again


def test_entries_that_lower_verification_give_way_to_gpuprovs(nodes: Sandbox) -> None:
    for node, repo in APT_NODES.items():
        url = f"{SANDBOX_REPOS_URL}/{repo}/x86_64"
        sh(nodes, node, "; ".join([
            # gpuprov's one-line entry of earlier versions, then three by hand: trusted=yes, no Signed-By,
            # and Debian's archive key (not the repository's).
            f"echo 'deb [signed-by=/usr/share/keyrings/nvidia-cuda-archive-keyring.asc] {url}/ /'"
            f" > {LISTS}/nvidia-cuda.list",
            f"echo 'deb [trusted=yes] {url} /' > {LISTS}/hand.list",
            f"printf 'Types: deb\\nURIs: {url}/\\nSuites: /\\n\\nTypes: deb\\nURIs: {url}/\\nSuites: /\\n"
            f"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\\n' > {LISTS}/hand.sources",
        ]))  # fmt: skip
        broken = on_node(nodes, node, "apt-get update -q 2>&1")
        # apt names the first option it finds in conflict: Trusted (trusted=yes) before Signed-By.
        assert broken.returncode != 0 and "Conflicting values set for option" in broken.stdout
    url = f"{SANDBOX_REPOS_URL}/rhel9/x86_64"
    copies = (
        f"[nvidia-cuda]\\nname=copy\\nbaseurl={url}\\ngpgcheck=0\\n\\n"  # gpuprov's repository id
        f"[cuda-copy]\\nbaseurl={url}/\\ngpgcheck=0\\n"  # the same baseurl
    )
    sh(nodes, DNF_NODE, f"printf '{copies}' > /etc/yum.repos.d/hand.repo")

    first = run_role(nodes)
    assert all(first[node]["changed"] for node in [*APT_NODES, DNF_NODE]), first
    for node in APT_NODES:
        assert_apt_works(nodes, node)
        assert active_apt_entries(nodes, node) == [f"{LISTS}/nvidia-cuda.sources"]
        sources = sh(nodes, node, f"cat {LISTS}/nvidia-cuda.sources")
        assert "Signed-By: /usr/share/keyrings/nvidia-cuda-archive-keyring.asc" in sources
        assert "Trusted" not in sources
    ids = dnf_repo_ids(nodes, DNF_NODE)
    assert "cuda-copy" not in ids and ids.count("nvidia-cuda") == 1, ids
    assert "gpgcheck = 1" in sh(nodes, DNF_NODE, "cat /etc/yum.repos.d/nvidia-cuda.repo")
    sh(nodes, DNF_NODE, "dnf -y -q makecache")  # -y: accept the metadata key the role wrote (repo_gpgcheck)

    again = run_role(nodes)
    assert {node: host["changed"] for node, host in again.items()} == dict.fromkeys(again, 0), again
