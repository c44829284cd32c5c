"""The mirror's rpm repositories: NVIDIA's names, epochs and versions, package and metadata signatures,
and dnf installing through NVIDIA's module streams."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gpuprov.sandbox import mirror, standins
from gpuprov.sandbox.mirror import RPM_REPOS, MirrorContent
from gpuprov.sandbox.standins import CATALOGUE
from tests.local.sandbox.mirror.helpers import (
    needs_build_tools,
    repo,
    run,
)

pytestmark = needs_build_tools


@pytest.fixture(scope="module")
def rpms(built: MirrorContent) -> list[Path]:
    return sorted(repo(built, "rhel9").glob("*.rpm"))


@pytest.mark.integration
def test_rpms_carry_nvidia_names_and_versions(rpms: list[Path]) -> None:
    query = run("rpm", "-qp", "--qf", r"%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE} %{ARCH}\n", *rpms).stdout
    found = set(query.splitlines())
    for expected in (
        # NVIDIA's driver rpms carry epoch 3 (nvidia-driver.spec, NVIDIA/yum-packaging-nvidia-driver).
        "nvidia-driver 3:550.127.08-1 x86_64",
        "nvidia-driver-cuda 3:535.216.03-1 x86_64",
        "nvidia-driver-cuda-libs 3:550.127.08-1 x86_64",
        "nvidia-kmod-common 3:550.127.08-1 x86_64",
        "kmod-nvidia-open-dkms 3:570.124.06-1 x86_64",
        "nvidia-fabric-manager 0:550.127.08-1 x86_64",
        "cuda-toolkit-12-8 0:12.8.1-1 x86_64",
        "libcudnn9-devel-cuda-12 0:9.5.1.17-1 x86_64",
        "libcudnn8 0:8.9.7.29-1.cuda12.2 x86_64",
        "libnccl 0:2.21.5-1+cuda12.4 x86_64",
        "libnccl-devel 0:2.26.2-1+cuda12.8 x86_64",
        "datacenter-gpu-manager 1:3.3.9-1 x86_64",
        "nvidia-container-toolkit-base 0:1.17.3-1 x86_64",
    ):
        assert expected in found
    carried = CATALOGUE.carrying(mirror.repository_cuda()["rhel9"])
    assert len(found) == len(rpms) == len(standins.rpm_packages(carried))


@pytest.mark.integration
def test_rpms_are_signed_and_verify_after_importing_the_key(
    built: MirrorContent, rpms: list[Path], tmp_path: Path
) -> None:
    dbpath = ["--dbpath", str(tmp_path / "rpmdb")]
    (tmp_path / "rpmdb").mkdir()
    assert run("rpm", *dbpath, "--import", repo(built, "rhel9") / built.key_file_name).returncode == 0
    checked = run("rpm", *dbpath, "-K", *rpms)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("digests signatures OK") == len(rpms)


@pytest.mark.integration
def test_rpms_require_nothing_but_other_stand_ins(rpms: list[Path]) -> None:
    """The test hosts' rpm database starts empty: no /bin/sh, no sonames, no files outside the mirror."""
    provided = set(run("rpm", "-qp", "--provides", *rpms).stdout.split())
    for rpm_file in rpms:
        for line in run("rpm", "-qp", "--requires", rpm_file).stdout.splitlines():
            name = line.split()[0]
            assert name.startswith("rpmlib(") or name in provided, f"{rpm_file.name} requires {line}"


@pytest.mark.integration
def test_repomd_signature_verifies(built: MirrorContent, keyring: Path) -> None:
    for name in RPM_REPOS:
        repomd = repo(built, name) / "repodata" / "repomd.xml"
        assert run("gpgv", "--keyring", keyring, f"{repomd}.asc", repomd).returncode == 0


@pytest.mark.integration
@pytest.mark.skipif(
    shutil.which("dnf") is None or os.geteuid() != 0, reason="needs dnf (as on the rocky-like hosts) and root"
)
def test_dnf_installs_with_package_and_metadata_signatures_checked(
    built: MirrorContent, served: str, tmp_path: Path
) -> None:
    base = f"{served}/cuda/repos/rhel9/x86_64"
    conf = tmp_path / "dnf.conf"
    conf.write_text(
        f"[main]\nreposdir={tmp_path / 'none'}\n\n[standin]\nname=stand-in\nbaseurl={base}\n"
        f"gpgcheck=1\nrepo_gpgcheck=1\ngpgkey={base}/{built.key_file_name}\n"
    )
    dnf = ["dnf", "-y", "-c", conf, f"--installroot={tmp_path / 'root'}", "--releasever=9"]
    try:
        packages = [
            "nvidia-driver-cuda-550.127.08",
            "libnccl-2.21.5-1+cuda12.4",
            "kmod-nvidia-open-dkms-550.127.08",
        ]
        # NVIDIA's module metadata: the default stream (latest-dkms) hides the older branches...
        hidden = run(*dnf, "install", *packages)
        # ...until the branch's stream is enabled, and another stream cannot simply be enabled over it.
        enabled = run(*dnf, "module", "enable", "nvidia-driver:550-open")
        refused = run(*dnf, "module", "enable", "nvidia-driver:570-open")
        proc = run(*dnf, "install", *packages)
    finally:
        # repo_gpgcheck makes dnf start a gpg-agent on its keyring in the install root; stop it.
        for pubring in (tmp_path / "root").glob("var/cache/dnf/*/pubring"):
            run("gpgconf", "--homedir", pubring, "--kill", "gpg-agent")
    assert hidden.returncode != 0 and "nvidia-driver-cuda-550.127.08" in hidden.stderr
    assert enabled.returncode == 0, enabled.stderr[-2000:]
    assert refused.returncode != 0 and "module_stream_switch" in refused.stderr
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert os.readlink(tmp_path / "root/usr/lib64/libcuda.so.1") == "libcuda.so.550.127.08"
