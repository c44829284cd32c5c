"""nvidia_driver's Secure Boot signing tasks run for real on localhost (tasks/dkms-signing.yml and
dkms-signing-shim.yml): the decision from `dkms --version` per distribution (dell/dkms: mok_signing_key from
v3.0.4; before it, sign_build's kmodsign with /var/lib/shim-signed/mok/MOK.priv and MOK.der, on Ubuntu), and
the user's key and certificate put at the MOK path (a temporary directory here) as dkms 2.8.7 reads them:
the key as given, the certificate as DER, another key already there never replaced, a re-run unchanged."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import run_play

TASKS = resources.data_dir("roles") / "nvidia_driver" / "tasks"
FILTERS = {"ANSIBLE_FILTER_PLUGINS": str(resources.data_dir("roles") / "nvidia_driver" / "filter_plugins")}


def _tasks(file: str, *prefixes: str) -> list[dict[str, Any]]:
    tasks = yaml.safe_load((TASKS / file).read_text())
    chosen = [t for t in tasks if t["name"].startswith(prefixes)]
    assert len(chosen) == len(prefixes)
    return chosen


def _decide(tmp_path: Path, distribution: str, dkms_says: str) -> subprocess.CompletedProcess[str]:
    tasks = _tasks("dkms-signing.yml", "Note the DKMS", "Refuse a DKMS")
    tasks.append(
        {"name": "Show", "ansible.builtin.debug": {"msg": "method={{ __nvidia_driver_signing.method }}"}}
    )
    extra = {
        "ansible_facts": {"distribution": distribution},
        "nvidia_driver_source": "nvidia",
        "nvidia_driver_ubuntu_precompiled": "auto",
        "__nvidia_driver_precompiled": False,
        "__nvidia_driver_dkms_version_out": {"rc": 0, "stdout": dkms_says, "stderr": ""},
    }
    return run_play(tmp_path, tasks, extra, env=FILTERS)


@pytest.mark.parametrize(
    ("distribution", "dkms_says", "method"),
    [
        ("Ubuntu", "dkms-2.8.1", "dkms-shim-mok"),  # Ubuntu 20.04
        ("Ubuntu", "dkms-2.8.7", "dkms-shim-mok"),  # Ubuntu 22.04
        ("Ubuntu", "dkms-3.0.11", "dkms-framework"),  # Ubuntu 24.04
        ("Debian", "dkms-3.0.10", "dkms-framework"),  # Debian 12
    ],
)
def test_each_dkms_signs_its_own_way(tmp_path: Path, distribution: str, dkms_says: str, method: str) -> None:
    proc = _decide(tmp_path, distribution, dkms_says)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert f"method={method}" in proc.stdout


def test_an_old_dkms_without_ubuntus_tools_is_refused_naming_its_version(tmp_path: Path) -> None:
    proc = _decide(tmp_path, "Debian", "dkms-2.8.7")
    assert proc.returncode != 0
    assert "Secure Boot is on on localhost, but its dkms (2.8.7) signs neither" in proc.stdout


def _key_and_cert(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}.priv", directory / f"{name}.pem"
    subprocess.run(
        ["openssl", "req", "-new", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


def _shim(tmp_path: Path, mok: Path, key: Path, cert: Path) -> subprocess.CompletedProcess[str]:
    tasks = _tasks(
        "dkms-signing-shim.yml",
        "Make the MOK directory",
        "Look at the key",
        "Refuse to replace",
        "Put the signing key",
        "Put the certificate",
    )
    for task in tasks:  # the test runs as a user: no chown to root
        task.get("ansible.builtin.file", task.get("ansible.builtin.copy", {})).pop("owner", None)
        task.get("ansible.builtin.file", task.get("ansible.builtin.copy", {})).pop("group", None)
    extra = {
        "__nvidia_driver_shim_mok_dir": str(mok),
        "__nvidia_driver_dkms_version": "2.8.7",
        "nvidia_driver_secure_boot_signing_key": str(key),
        "nvidia_driver_secure_boot_signing_cert": str(cert),
        # What dkms-signing.yml's stat of the user's files registered.
        "__nvidia_driver_signing_files": {"results": [{"stat": _stat(key)}, {"stat": _stat(cert)}]},
    }
    return run_play(tmp_path, tasks, extra)


def _stat(path: Path) -> dict[str, Any]:
    return {"exists": True, "checksum": hashlib.sha1(path.read_bytes()).hexdigest(), "path": str(path)}


def test_the_users_key_goes_to_the_mok_path_with_a_der_certificate(tmp_path: Path) -> None:
    key, cert = _key_and_cert(tmp_path, "user")
    mok = tmp_path / "shim-signed" / "mok"
    first = _shim(tmp_path, mok, key, cert)
    assert first.returncode == 0, first.stdout[-3000:]
    assert (mok / "MOK.priv").read_bytes() == key.read_bytes()
    der = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-outform", "DER"], capture_output=True, check=True
    )
    assert (mok / "MOK.der").read_bytes() == der.stdout
    assert (mok / "MOK.priv").stat().st_mode & 0o777 == 0o600
    again = _shim(tmp_path, mok, key, cert)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-2000:]


def test_another_key_at_the_mok_path_is_not_replaced(tmp_path: Path) -> None:
    key, cert = _key_and_cert(tmp_path, "user")
    other_key, _ = _key_and_cert(tmp_path, "other")
    mok = tmp_path / "mok"
    mok.mkdir()
    (mok / "MOK.priv").write_bytes(other_key.read_bytes())
    proc = _shim(tmp_path, mok, key, cert)
    assert proc.returncode != 0
    assert f"signs modules only with {mok}/MOK.priv, which holds another key" in proc.stdout
    assert (mok / "MOK.priv").read_bytes() == other_key.read_bytes()


# Canonical's precompiled modules (tasks/precompiled-modules.yml): the package names for the running kernel
# and the driver they are built from, read from what `apt-cache show` prints for them. The role's variables
# are the play's (a set_fact must be able to replace them), apt's answer an extra variable.
ROLE_VARS: dict[str, Any] = {
    "ansible_facts": {"kernel": "5.15.0-91-generic"},
    "nvidia_driver_version": "550.127.05",
    "nvidia_driver_ubuntu_kernel_flavour": "generic",
    "__nvidia_driver_apt_tail": "-550-server",
    "__nvidia_driver_precompiled_prefix": "linux-modules-nvidia-550-server-open-",
    "__nvidia_driver_precompiled_drops": "^nvidia-(dkms-|headless-(?!no-dkms-))",
    "__nvidia_driver_packages": [
        "nvidia-headless-550-server-open", "nvidia-headless-no-dkms-550-server-open",
        "nvidia-dkms-550-server-open", "nvidia-kernel-source-550-server-open",
        "nvidia-kernel-common-550-server", "nvidia-utils-550-server",
    ],
}  # fmt: skip


def _precompiled(tmp_path: Path, apt_says: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    tasks = _tasks("precompiled-modules.yml", "Leave DKMS out", "Refuse when Canonical")
    out = tmp_path / "decided.json"
    tasks.append(
        {
            "name": "Write what was decided",
            "ansible.builtin.copy": {
                "dest": str(out),
                "mode": "0644",
                "content": "{{ {'keep': __nvidia_driver_packages, "
                "'drop': __nvidia_driver_precompiled_removed, "
                "'modules': __nvidia_driver_precompiled_packages, "
                "'headers': __nvidia_driver_kernel_packages} | to_json }}",
            },
        }
    )
    proc = run_play(tmp_path, tasks, {"__nvidia_driver_precompiled_show": apt_says}, play_vars=ROLE_VARS)
    return proc.returncode, proc.stdout, (json.loads(out.read_text()) if out.exists() else {})


def test_precompiled_modules_replace_dkms_for_the_running_kernel(tmp_path: Path) -> None:
    apt_says = {
        "rc": 0,
        "stderr": "",
        "stdout": "Package: linux-modules-nvidia-550-server-open-generic\n"
        "Depends: linux-modules-nvidia-550-server-open-5.15.0-91-generic, nvidia-kernel-common-550-server "
        "(>= 550.127.05)\n",
    }
    rc, output, decided = _precompiled(tmp_path, apt_says)
    assert rc == 0, output[-3000:]
    assert decided == {
        "keep": [
            "nvidia-headless-no-dkms-550-server-open", "nvidia-kernel-source-550-server-open",
            "nvidia-kernel-common-550-server", "nvidia-utils-550-server",
        ],
        "drop": ["nvidia-headless-550-server-open", "nvidia-dkms-550-server-open"],
        "modules": [
            "linux-modules-nvidia-550-server-open-5.15.0-91-generic",
            "linux-modules-nvidia-550-server-open-generic",
        ],
        "headers": [],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("apt_says", "message"),
    [
        (
            {"rc": 100, "stdout": "", "stderr": "E: No packages found"},
            "its repositories do not offer them (E: No packages found)",
        ),
        (
            {"rc": 0, "stderr": "", "stdout": "Depends: nvidia-kernel-common-550-server (>= 550.144.03)\n"},
            "they are built for driver 550.144.03, not the locked 550.127.05",
        ),
    ],
)
def test_precompiled_modules_that_do_not_fit_are_refused(
    tmp_path: Path, apt_says: dict[str, Any], message: str
) -> None:
    rc, output, decided = _precompiled(tmp_path, apt_says)
    assert rc != 0 and decided == {}
    assert message in output
    assert "set nvidia_driver_ubuntu_precompiled: false" in output
