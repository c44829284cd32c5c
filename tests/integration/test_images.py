"""Sandbox images, built for real and booted: systemd comes up clean, sshd takes injected keys only, and
Ansible (over SSH, host keys checked) sees the OS each image stands for. ubuntu22.04 and rocky9 are
stand-ins built from Debian 12; see gpuprov.sandbox.images.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuprov import hosttools
from gpuprov.sandbox import docker, images

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="building sandbox images needs root"),
]

ANSIBLE = Path(sys.executable).parent / "ansible"
BOOT_TIMEOUT_S = 90

EXPECTED_FACTS = {
    "debian12": {
        "ansible_distribution": "Debian",
        "ansible_distribution_major_version": "12",
        "ansible_os_family": "Debian",
        "ansible_pkg_mgr": "apt",
    },
    "ubuntu22.04": {
        "ansible_distribution": "Ubuntu",
        "ansible_distribution_version": "22.04",
        "ansible_distribution_major_version": "22",
        "ansible_distribution_release": "jammy",
        "ansible_os_family": "Debian",
        "ansible_pkg_mgr": "apt",
    },
    "rocky9": {
        "ansible_distribution": "Rocky",
        "ansible_distribution_version": "9.4",
        "ansible_distribution_major_version": "9",
        "ansible_os_family": "RedHat",
        "ansible_pkg_mgr": "dnf",
    },
}


@dataclass(frozen=True)
class Host:
    os_name: str
    image: str
    container: str
    workdir: Path
    inventory: Path

    def exec(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", "exec", self.container, *cmd], capture_output=True, text=True, check=check
        )

    def ansible(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Ad-hoc Ansible against this host as the gpuprov user over SSH; output as one line per host."""
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(self.workdir / "ansible.cfg"),  # empty: no stray config from elsewhere
            "ANSIBLE_HOME": str(self.workdir / "ansible-home"),
            "ANSIBLE_HOST_KEY_CHECKING": "True",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        }
        proc = subprocess.run(
            [str(ANSIBLE), "-i", str(self.inventory), "node", "-o", *args],
            capture_output=True, text=True, env=env, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"ansible {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc


def _ssh_keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuprov-test", "-f", str(path)], check=True
    )
    return path.with_suffix(".pub").read_text().strip()


def _wait_for_boot(container: str) -> str:
    """The state systemd settles in (`systemctl is-system-running --wait`), retried while it starts up."""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline:
        proc = subprocess.run(
            ["docker", "exec", container, "systemctl", "is-system-running", "--wait"],
            capture_output=True, text=True, timeout=BOOT_TIMEOUT_S, check=False,
        )  # fmt: skip
        state = proc.stdout.strip()
        if state in ("running", "degraded", "maintenance", "stopping"):
            return state
        time.sleep(0.5)  # systemd or its bus is not up yet
    return state or "no answer"


@pytest.fixture(scope="module")
def network() -> Iterator[str]:
    docker.ensure_engine()
    name = f"gpuprov-test-images-{uuid.uuid4().hex[:8]}"
    docker.run("network", "create", name)
    yield name
    docker.run("network", "rm", name, check=False)


@pytest.fixture(scope="module", params=images.SANDBOX_OSES)
def host(
    request: pytest.FixtureRequest, network: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Host]:
    """A started container of one image, with injected host and client keys, as the cluster code does it."""
    os_name: str = request.param
    image = images.ensure_image(os_name)
    workdir = tmp_path_factory.mktemp(f"host-{os_name}")
    host_pub = _ssh_keygen(workdir / "ssh_host_ed25519_key")
    client_pub = _ssh_keygen(workdir / "client")
    (workdir / "authorized_keys").write_text(client_pub + "\n")

    container = f"gpuprov-test-{os_name.replace('.', '')}-{uuid.uuid4().hex[:8]}"
    docker.run("create", "--name", container, "--network", network, *images.RUN_ARGS, image)
    try:
        for name in ("ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"):
            docker.run("cp", str(workdir / name), f"{container}:/etc/ssh/{name}")
        docker.run(
            "cp", str(workdir / "authorized_keys"), f"{container}:/home/{images.USER}/.ssh/authorized_keys"
        )
        docker.run("start", container)
        networks = (docker.inspect("container", container) or {})["NetworkSettings"]["Networks"]
        address = networks[network]["IPAddress"]
        (workdir / "known_hosts").write_text(f"{address} {' '.join(host_pub.split()[:2])}\n")
        (workdir / "ansible.cfg").write_text("")
        inventory = workdir / "inventory.ini"
        inventory.write_text(
            f"node ansible_host={address} ansible_user={images.USER} "
            f"ansible_ssh_private_key_file={workdir / 'client'} "
            f"ansible_ssh_common_args='-o UserKnownHostsFile={workdir / 'known_hosts'} "
            "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o ControlMaster=no'\n"
        )
        yield Host(os_name, image, container, workdir, inventory)
    finally:
        docker.run("rm", "-f", container, check=False)


def test_an_existing_image_is_reused_at_once():
    docker.ensure_engine()
    ref = images.ensure_image("debian12")
    started = time.monotonic()
    assert images.ensure_image("debian12") == ref
    assert time.monotonic() - started < 1.0
    labels = (docker.inspect("image", ref) or {})["Config"]["Labels"]
    assert labels == {images.LABEL_OS: "debian12", images.LABEL_HASH: ref.rsplit("-", 1)[1]}


def test_systemd_boots_without_failed_units(host: Host):
    state = _wait_for_boot(host.container)
    failed = host.exec("systemctl", "--failed", "--no-legend", "--plain", check=False).stdout
    assert state == "running", f"systemd is {state}; failed units:\n{failed}"
    assert host.exec("systemctl", "is-active", "ssh.service").stdout.strip() == "active"
    # systemd made a machine id of its own for this container
    assert len(host.exec("cat", "/etc/machine-id").stdout.strip()) == 32


def test_image_carries_no_host_keys_machine_id_or_archive_sources(host: Host):
    def in_image(script: str) -> str:
        return subprocess.run(
            ["docker", "run", "--rm", host.image, "sh", "-c", script],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    assert in_image("ls /etc/ssh | grep ssh_host_ || true") == ""
    assert in_image("cat /etc/machine-id /etc/apt/sources.list; ls -A /etc/apt/sources.list.d") == ""


def test_sshd_takes_keys_only_and_only_the_injected_host_key(host: Host):
    _wait_for_boot(host.container)
    effective = host.exec("sshd", "-T").stdout.lower().splitlines()
    for setting in (
        "passwordauthentication no",
        "kbdinteractiveauthentication no",
        "permitrootlogin no",
        "usedns no",
    ):
        assert setting in effective
    assert [line for line in effective if line.startswith("hostkey ")] == [
        "hostkey /etc/ssh/ssh_host_ed25519_key"
    ]
    keys = host.exec("sh", "-c", "ls /etc/ssh | grep ssh_host_").stdout.split()
    assert keys == ["ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"]
    assert host.exec("stat", "-c", "%a %U", "/etc/sudoers.d/gpuprov").stdout.split() == ["440", "root"]


def test_ansible_over_ssh_sees_the_os_and_can_become_root(host: Host):
    _wait_for_boot(host.container)
    proc = host.ansible("-m", "ansible.builtin.setup", "-a", "gather_subset=!all,!min,distribution,pkg_mgr")
    facts = json.loads(proc.stdout.split("=>", 1)[1])["ansible_facts"]
    expected = EXPECTED_FACTS[host.os_name]
    assert {name: facts.get(name) for name in expected} == expected

    whoami = host.ansible("-b", "-m", "ansible.builtin.command", "-a", "id -un")
    assert whoami.stdout.strip().endswith("(stdout) root")


@pytest.mark.parametrize("host", ["rocky9"], indirect=True)
def test_rocky_like_dnf_installs_from_a_local_repository(host: Host, tmp_path: Path):
    _wait_for_boot(host.container)
    repo = _probe_rpm_repository(tmp_path)
    docker.run("cp", str(repo), f"{host.container}:/srv/probe-repo")
    repo_file = tmp_path / "probe.repo"
    repo_file.write_text("[probe]\nname=gpuprov test probe\nbaseurl=file:///srv/probe-repo\ngpgcheck=0\n")
    docker.run("cp", str(repo_file), f"{host.container}:/etc/yum.repos.d/probe.repo")

    assert host.exec("rpm", "-qa").stdout.strip() == ""  # the rpm database starts empty
    installed = host.ansible("-b", "-m", "ansible.builtin.dnf", "-a", "name=gpuprov-probe state=present")
    assert "CHANGED" in installed.stdout
    assert host.exec("rpm", "-q", "gpuprov-probe").stdout.startswith("gpuprov-probe-1.0-1")


def _probe_rpm_repository(workdir: Path) -> Path:
    """A repository with one noarch package that requires nothing, made with rpmbuild and createrepo_c."""
    hosttools.ensure({"rpmbuild": "rpm", "createrepo_c": "createrepo-c"}, "the rocky-like image test")
    spec = workdir / "probe.spec"
    spec.write_text(
        textwrap.dedent("""\
            Name: gpuprov-probe
            Version: 1.0
            Release: 1
            Summary: Probe package for the gpuprov image tests
            License: Apache-2.0
            BuildArch: noarch
            AutoReqProv: no
            %description
            Probe package for the gpuprov image tests.
            %install
            mkdir -p %{buildroot}/usr/share/gpuprov-probe
            echo probe > %{buildroot}/usr/share/gpuprov-probe/probe.txt
            %files
            /usr/share/gpuprov-probe/probe.txt
        """)
    )
    subprocess.run(
        ["rpmbuild", "--define", f"_topdir {workdir / 'rpmbuild'}", "-bb", str(spec)],
        capture_output=True, check=True,
    )  # fmt: skip
    repo = workdir / "repo"
    repo.mkdir()
    for rpm in (workdir / "rpmbuild" / "RPMS").rglob("*.rpm"):
        rpm.rename(repo / rpm.name)
    subprocess.run(["createrepo_c", "-q", str(repo)], capture_output=True, check=True)
    return repo
