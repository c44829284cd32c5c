"""The Ubuntu stand-in's nvidia-persistenced unit is Ubuntu's, word for word (tests/recorded)."""

from __future__ import annotations

from pathlib import Path

from gpuprov.sandbox.standins import drivers
from gpuprov.sandbox.standins.catalogue import CATALOGUE

RECORDED = Path(__file__).parents[2] / "recorded" / "ubuntu-nvidia-persistenced.service"


def test_the_unit_is_ubuntus() -> None:
    assert RECORDED.read_text() == drivers.UBUNTU_PERSISTENCED_UNIT


def test_nvidia_compute_utils_ships_it_and_creates_the_user() -> None:
    for release in CATALOGUE.drivers:
        # "nvidia-compute-utils-<branch>" up to R580, "nvidia-compute-utils" from R590.
        package = next(p for p in drivers.deb_driver(release) if p.name.startswith("nvidia-compute-utils"))
        units = [e for e in package.entries if e.path == "/lib/systemd/system/nvidia-persistenced.service"]
        assert [getattr(u, "content", b"") for u in units] == [RECORDED.read_bytes()]
        assert "useradd --system" in package.postinst
