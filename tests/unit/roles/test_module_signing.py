"""nvidia_driver's choice of how the kernel modules come signed (filter_plugins/module_signing.py), from the
sources it names: dell/dkms (kmodsign and /var/lib/shim-signed/mok in sign_build from 2016 through v3.0.3,
mok_signing_key from v3.0.4) and Canonical's signed precompiled modules for nvidia_driver_source: ubuntu."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.unit.roles.plugins import role_plugin


def _plugin() -> ModuleType:
    return role_plugin("nvidia_driver", "module_signing.py")


def _method(*args: object) -> str:
    return str(_plugin().nvidia_driver_signing_method(*args)["method"])


@pytest.mark.parametrize(
    ("secure_boot", "distribution", "source", "precompiled", "dkms", "method"),
    [
        # Ubuntu's own -server driver under Secure Boot: Canonical's signed modules, no DKMS.
        (True, "Ubuntu", "ubuntu", "auto", "", "precompiled"),
        (False, "Ubuntu", "ubuntu", "auto", "", "unsigned"),
        (False, "Ubuntu", "ubuntu", True, "", "precompiled"),
        (True, "Ubuntu", "ubuntu", False, "dkms-2.8.7", "dkms-shim-mok"),
        # NVIDIA's repository: DKMS, signed as the host's dkms can.
        (True, "Ubuntu", "nvidia", "auto", "dkms-2.8.1", "dkms-shim-mok"),  # Ubuntu 20.04
        (True, "Ubuntu", "nvidia", "auto", "dkms-2.8.7", "dkms-shim-mok"),  # Ubuntu 22.04
        (True, "Ubuntu", "nvidia", "auto", "dkms-3.0.3", "dkms-shim-mok"),
        (True, "Ubuntu", "nvidia", "auto", "dkms-3.0.4", "dkms-framework"),
        (True, "Ubuntu", "nvidia", "auto", "dkms-3.0.11", "dkms-framework"),  # Ubuntu 24.04
        (True, "Debian", "nvidia", "auto", "dkms-3.0.10", "dkms-framework"),  # Debian 12
        (True, "Rocky", "nvidia", "auto", "dkms-3.1.4", "dkms-framework"),
        # No kmodsign nor shim-signed outside Ubuntu; an unreadable version is no version.
        (True, "Debian", "nvidia", "auto", "dkms-2.8.7", "refuse"),
        (True, "Ubuntu", "nvidia", "auto", "dkms: command not found", "refuse"),
        # The precompiled setting means nothing without Ubuntu's own packages.
        (True, "Debian", "nvidia", True, "dkms-3.0.10", "dkms-framework"),
        (False, "Debian", "nvidia", "auto", "", "unsigned"),
    ],
)
def test_the_signing_method(
    secure_boot: bool, distribution: str, source: str, precompiled: object, dkms: str, method: str
) -> None:
    assert _method(secure_boot, distribution, source, precompiled, dkms, "h1") == method


def test_a_refusal_names_the_host_and_the_version() -> None:
    result = _plugin().nvidia_driver_signing_method(True, "Debian", "nvidia", "auto", "dkms-2.8.7", "h1")
    assert result["reason"].startswith("Secure Boot is on on h1, but its dkms (2.8.7) signs neither")
    assert "Install dkms 3.0.4 or newer, or turn Secure Boot off" in result["reason"]


def test_ansible_passes_strings_for_booleans() -> None:
    assert _method("True", "Ubuntu", "ubuntu", "auto", "") == "precompiled"
    assert _method("False", "Ubuntu", "ubuntu", "true", "") == "precompiled"
    assert _method("False", "Ubuntu", "ubuntu", "false", "") == "unsigned"
