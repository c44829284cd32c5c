"""Sandbox image recipes without Docker: mirror discovery, content hashes, the OS table."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuprov.errors import BadInput
from gpuprov.sandbox import images

ONE_LINE = """\
# deb http://old.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian.gpg] http://mirror.example/debian/ bookworm main contrib
deb http://security.debian.org/debian-security bookworm-security main
"""

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def write_apt(root: Path, sources_list: str = "", parts: dict[str, str] | None = None) -> Path:
    (root / "sources.list.d").mkdir(parents=True)
    (root / "sources.list").write_text(sources_list)
    for name, text in (parts or {}).items():
        (root / "sources.list.d" / name).write_text(text)
    return root


@pytest.fixture(autouse=True)
def no_mirror_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(images.MIRROR_ENV, raising=False)


def test_mirror_from_one_line_sources_skips_comments_options_and_security(tmp_path: Path):
    apt = write_apt(tmp_path, ONE_LINE)
    assert images.debian_mirror(apt) == "http://mirror.example/debian"


def test_mirror_from_deb822_sources_skips_security(tmp_path: Path):
    apt = write_apt(tmp_path, parts={"debian.sources": DEB822})
    assert images.debian_mirror(apt) == "http://deb.debian.org/debian"


def test_deb822_disabled_stanzas_deb_src_and_multiline_keys_are_handled(tmp_path: Path):
    sources = textwrap.dedent("""\
        Types: deb
        URIs: http://disabled.example/debian
        Suites: bookworm
        Components: main
        Enabled: no

        Types: deb-src
        URIs: http://source.example/debian
        Suites: bookworm
        Components: main

        Types: deb
        URIs: https://inline-key.example/debian
        Suites: bookworm
        Components: main non-free-firmware
        Signed-By:
         -----BEGIN PGP PUBLIC KEY BLOCK-----
         .
         mQINBGPL0BUBEADmW5NdOOHwPIJlgPu6JDcKw/NZJPR8lsD9K7UgrXg3z8i5Vbu3
         -----END PGP PUBLIC KEY BLOCK-----
        """)
    apt = write_apt(tmp_path, parts={"a.sources": sources})
    assert images.debian_mirror(apt) == "https://inline-key.example/debian"


def test_sources_list_comes_first_and_other_file_names_are_ignored(tmp_path: Path):
    apt = write_apt(
        tmp_path,
        "deb http://main.example/debian bookworm main\n",
        {
            "a.sources": DEB822,
            "old.list.disabled": "deb http://ignored.example/debian bookworm main\n",
        },
    )
    assert images.debian_mirror(apt) == "http://main.example/debian"


def test_mirror_falls_back_to_debian_default_without_a_bookworm_source(tmp_path: Path):
    apt = write_apt(tmp_path, "deb http://archive.ubuntu.com/ubuntu jammy main\n")
    assert images.debian_mirror(apt) == images.DEFAULT_DEBIAN_MIRROR
    assert images.debian_mirror(tmp_path / "missing") == images.DEFAULT_DEBIAN_MIRROR


def test_mirror_environment_variable_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(images.MIRROR_ENV, "http://local.example/debian/")
    assert images.debian_mirror(write_apt(tmp_path, ONE_LINE)) == "http://local.example/debian"


def test_image_refs_name_the_os_and_a_short_hash():
    for os_name in images.SANDBOX_OSES:
        assert re.fullmatch(rf"gpuprov/node:{re.escape(os_name)}-[0-9a-f]{{12}}", images.image_ref(os_name))


def test_hashes_are_stable_across_processes():
    """Another run of gpuprov (its own string-hash seed) names the same images, so it reuses them."""
    script = (
        "from gpuprov.sandbox import images\n"
        "print(images.base_hash())\n"
        "for name in images.SANDBOX_OSES: print(images.image_hash(images.os_spec(name)))\n"
    )
    theirs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.split()
        for seed in ("1", "2")
    ]  # fmt: skip
    ours = [images.base_hash(), *(images.image_hash(images.os_spec(n)) for n in images.SANDBOX_OSES)]
    assert theirs == [ours, ours]


def test_every_os_has_its_own_hash():
    hashes = {images.image_hash(images.os_spec(name)) for name in images.SANDBOX_OSES}
    assert len(hashes) == len(images.SANDBOX_OSES)


def test_image_hash_follows_the_os_files():
    spec = images.os_spec("ubuntu22.04")
    files = dict(spec.files)
    files["/etc/lsb-release"] += "# changed\n"
    assert images.image_hash(dataclasses.replace(spec, files=tuple(files.items()))) != images.image_hash(spec)


def test_base_packages_change_base_and_image_hashes(monkeypatch: pytest.MonkeyPatch):
    spec = images.os_spec("debian12")
    before = images.base_hash(), images.image_hash(spec)
    monkeypatch.setattr(images, "BASE_PACKAGES", (*images.BASE_PACKAGES, "vim-tiny"))
    after = images.base_hash(), images.image_hash(spec)
    assert before[0] != after[0]
    assert before[1] != after[1]


def test_recipe_version_changes_the_hashes(monkeypatch: pytest.MonkeyPatch):
    spec = images.os_spec("debian12")
    before = images.image_hash(spec)
    monkeypatch.setattr(images, "RECIPE_VERSION", images.RECIPE_VERSION + 1)
    assert images.image_hash(spec) != before


def test_editing_the_build_steps_rebuilds_images_but_keeps_the_base_rootfs(monkeypatch: pytest.MonkeyPatch):
    spec = images.os_spec("debian12")
    before = images.base_hash(), images.image_hash(spec)
    monkeypatch.setattr(images, "_recipe_source", lambda: "# an edited images.py\n")
    assert images.base_hash() == before[0]
    assert images.image_hash(spec) != before[1]


def test_unknown_os_is_bad_input_listing_the_supported_ones():
    with pytest.raises(BadInput) as raised:
        images.ensure_image("centos7")
    assert "centos7" in raised.value.message
    for os_name in images.SANDBOX_OSES:
        assert os_name in raised.value.message


def test_stand_ins_carry_the_release_files_ansible_reads():
    ubuntu = dict(images.os_spec("ubuntu22.04").files)
    assert 'VERSION_ID="22.04"' in ubuntu["/usr/lib/os-release"]
    assert "UBUNTU_CODENAME=jammy" in ubuntu["/usr/lib/os-release"]
    assert "DISTRIB_RELEASE=22.04" in ubuntu["/etc/lsb-release"]

    rocky = images.os_spec("rocky9")
    assert 'ID="rocky"' in dict(rocky.files)["/usr/lib/os-release"]
    assert dict(rocky.files)["/etc/rocky-release"] == "Rocky Linux release 9.4 (Blue Onyx)\n"
    assert ("/etc/redhat-release", "rocky-release") in rocky.symlinks
    assert "/etc/debian_version" in rocky.removed
    assert set(images.RPM_PACKAGES) <= set(rocky.extra_packages)


def test_run_args_let_systemd_run_as_pid_1_without_privileged():
    args = " ".join(images.RUN_ARGS)
    assert "--privileged" not in args
    for needed in (
        "--cap-add SYS_ADMIN",
        "--security-opt seccomp=unconfined",
        "-v /sys/fs/cgroup:/sys/fs/cgroup:ro",
        "--tmpfs /run",
        "--tmpfs /run/lock",
    ):
        assert needed in args
