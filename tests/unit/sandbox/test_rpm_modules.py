"""The stand-in rpm repositories' dnf module metadata against NVIDIA's streams and profiles, as recorded in
tests/recorded/el-module-streams.yaml (from NVIDIA's genmodules.py), and the nvidia_driver role's choice of
stream against the streams that exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuprov import resources
from gpuprov.sandbox import rpm_modules, standins
from gpuprov.sandbox.standins import recipes

RECORDED = yaml.safe_load((Path(__file__).parents[2] / "recorded" / "el-module-streams.yaml").read_text())
RPMS = standins.rpm_packages(standins.CATALOGUE)
ROLE_VARS = yaml.safe_load(
    (resources.data_dir("roles") / "nvidia_driver" / "vars" / "RedHat.yml").read_text()
)


def documents() -> list[dict]:
    return list(yaml.safe_load_all(rpm_modules.modules_yaml(RPMS, distro="rhel9")))


def test_the_rpm_stand_ins_hold_the_recorded_branches() -> None:
    assert sorted({p.version.split(".")[0] for p in RPMS if p.name == "nvidia-driver"}) == [
        "535",
        "550",
        "570",
        "580",
    ]


def test_streams_and_profiles_are_nvidias() -> None:
    modulemd = [d["data"] for d in documents() if d["document"] == "modulemd"]
    found = {
        m["stream"]: [
            m["description"].rsplit(" ", 1)[-1].rstrip(".").split(".")[0],
            _kmod(m["profiles"]["default"]["rpms"]),
            list(m["profiles"]),
        ]
        for m in modulemd
    }
    assert found == RECORDED["streams_for_535_550_570_580"]
    assert {m["name"] for m in modulemd} == {RECORDED["module"]}


def _kmod(rpms: list[str]) -> str | None:
    kmods = [r for r in rpms if r.startswith("kmod-nvidia")]
    assert len(kmods) <= 1
    return kmods[0] if kmods else None


def test_defaults_are_nvidias() -> None:
    defaults = [d["data"] for d in documents() if d["document"] == "modulemd-defaults"]
    assert len(defaults) == 1
    assert defaults[0]["module"] == RECORDED["module"]
    assert defaults[0]["stream"] == RECORDED["default_stream"]
    streams = [d["data"]["stream"] for d in documents() if d["document"] == "modulemd"]
    assert defaults[0]["profiles"] == {s: [RECORDED["default_profile"]] for s in streams}


def test_stream_artifacts_hold_only_their_branch_and_one_kmod() -> None:
    for m in (d["data"] for d in documents() if d["document"] == "modulemd"):
        branch = m["description"].rsplit(" ", 1)[-1].split(".")[0]
        versions = {a.split(":", 1)[1].split(".")[0] for a in m["artifacts"]["rpms"]}
        assert versions == {branch}, m["stream"]
        kmods = [a for a in m["artifacts"]["rpms"] if a.startswith("kmod-nvidia")]
        if "open" in m["stream"]:
            assert len(kmods) == 1 and kmods[0].startswith("kmod-nvidia-open-dkms-")
        elif "dkms" in m["stream"]:
            assert len(kmods) == 1 and kmods[0].startswith("kmod-nvidia-latest-dkms-")
        else:  # precompiled kmods: the sandbox has none
            assert kmods == []


@pytest.mark.parametrize("branch", recipes.RPM_DRIVER_BRANCHES)
@pytest.mark.parametrize("flavor", ["open", "proprietary"])
def test_role_picks_only_streams_that_exist(branch: str, flavor: str) -> None:
    """setup-RedHat.yml enables <branch><suffix>; that stream exists and carries the role's kmod package."""
    stream = branch + ROLE_VARS["__nvidia_driver_module_stream_suffix"][flavor]
    recorded = RECORDED["streams_for_535_550_570_580"]
    assert stream in recorded
    assert recorded[stream][1] == ROLE_VARS["__nvidia_driver_kmod_package"][flavor]
    assert stream not in RECORDED["missing_streams"]
    assert ROLE_VARS["__nvidia_driver_module"] == RECORDED["module"]
