"""The `nvidia_driver_signing_method` filter: how a host's NVIDIA kernel modules come signed.

- "precompiled": Canonical's signed precompiled modules (linux-modules-nvidia-<branch>-server[-open]-<kernel>,
  built and signed by Canonical, trusted by Ubuntu's shim without a key of the user's), with
  nvidia_driver_source: ubuntu on Ubuntu: under Secure Boot by default ("auto"), always when the setting is
  true. NVIDIA's GPU Operator documents them as what Secure Boot on Ubuntu needs ("Installing Precompiled and
  Canonical Signed Drivers on Ubuntu 20.04 and 22.04").
- "dkms-framework": dkms >= 3.0.4 signs with mok_signing_key / mok_certificate from
  /etc/dkms/framework.conf.d/ (dell/dkms, tag v3.0.4's dkms.in; Debian 12 and Ubuntu 24.04 ship 3.0.x >= it).
- "dkms-shim-mok": an older dkms (from dell/dkms b25cb7e, 2016, through v3.0.3: Ubuntu 20.04's 2.8.1 and
  22.04's 2.8.7) signs in `sign_build`, called by `build_module`, with `kmodsign sha512
  /var/lib/shim-signed/mok/MOK.priv /var/lib/shim-signed/mok/MOK.der`, when kmodsign is installed (Ubuntu's
  sbsigntool), that directory exists and update-secureboot-policy is there (Ubuntu's shim-signed): the role
  puts the user's key at that path. Only on Ubuntu, where those tools exist.
- "unsigned": Secure Boot is off and no precompiled modules were asked for: DKMS builds them unsigned.
- "refuse": none of these can work; `reason` says why and what to do.
"""

from __future__ import annotations

import re
from typing import Any

FRAMEWORK_MIN = (3, 0, 4)


def _version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"[0-9]+(\.[0-9]+)+", text or "")
    return tuple(int(p) for p in match.group(0).split(".")) if match else None


def nvidia_driver_signing_method(
    secure_boot: Any,
    distribution: str,
    source: str,
    precompiled: Any,
    dkms_version: str = "",
    host: str = "",
) -> dict[str, str]:
    """{method, reason} (see the module docstring); dkms_version is `dkms --version`'s output, or "" when
    dkms was not asked (the precompiled and unsigned cases do not need it)."""
    secure = str(secure_boot).lower() in ("true", "1", "yes")
    wanted = str(precompiled).lower()
    ubuntu_source = distribution == "Ubuntu" and source == "ubuntu"
    if ubuntu_source and (wanted in ("true", "yes", "1") or (wanted == "auto" and secure)):
        return {"method": "precompiled", "reason": ""}
    if not secure:
        return {"method": "unsigned", "reason": ""}
    version = _version(dkms_version)
    if version is not None and version >= FRAMEWORK_MIN:
        return {"method": "dkms-framework", "reason": ""}
    if version is not None and distribution == "Ubuntu":
        return {"method": "dkms-shim-mok", "reason": ""}
    answer = dkms_version.strip() or "no answer"
    shown = ".".join(map(str, version)) if version else f"version unknown: {answer}"
    return {
        "method": "refuse",
        "reason": (
            f"Secure Boot is on on {host}, but its dkms ({shown}) signs neither with mok_signing_key (dkms "
            "3.0.4 and newer) nor, outside Ubuntu, with Ubuntu's kmodsign and shim-signed MOK: the NVIDIA "
            "modules would be built unsigned and would not load. Install dkms 3.0.4 or newer, or turn Secure "
            "Boot off in the firmware."
        ),
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"nvidia_driver_signing_method": nvidia_driver_signing_method}
