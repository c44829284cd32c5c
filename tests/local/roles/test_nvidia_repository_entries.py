"""nvidia_repository's host-side modules (roles/nvidia_repository/library/) on the repository states a host
can be in: NVIDIA's cuda-keyring list and cuda-rhel9.repo as recorded (tests/recorded/nvidia-repository/),
gpuprov's earlier entries, hand-written one-line and deb822 entries. Real gpg reads the keys; this machine's
real apt reads the result: before, "Conflicting values set for option Signed-By"; after, one entry."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpuprov import resources

LIBRARY = resources.data_dir("roles") / "nvidia_repository" / "library"
RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-repository"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
RHEL9 = "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, LIBRARY / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


APT = load("nvidia_apt_entries")
YUM = load("nvidia_yum_entries")


def make_key(home: Path, name: str) -> tuple[str, Path, Path]:
    """A fresh key: its fingerprint, a binary keyring (.gpg, as cuda-keyring's) and an armored one (.asc)."""
    home.mkdir(mode=0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--quiet"]
    subprocess.run(
        [*gpg, "--passphrase", "", "--quick-gen-key", name, "ed25519", "sign", "never"], check=True
    )
    listing = subprocess.run([*gpg, "--with-colons", "--list-keys"], capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    binary, armored = home / f"{name}.gpg", home / f"{name}.asc"
    subprocess.run([*gpg, "--output", str(binary), "--export", fingerprint], check=True)
    subprocess.run([*gpg, "--armor", "--output", str(armored), "--export", fingerprint], check=True)
    return fingerprint, binary, armored


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("keys")
    verified, other = make_key(root / "v", "verified"), make_key(root / "o", "other")
    yield {"fp": verified[0], "gpg": verified[1], "asc": verified[2], "other": other[1]}
    # Key generation started a gpg-agent per home; it would outlive the test run.
    for home in (root / "v", root / "o"):
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)


def apt_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    etc = tmp_path / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text("")
    for name, text in files.items():
        (etc / name).write_text(text)
    return etc


def apt_reads(etc: Path) -> subprocess.CompletedProcess[str]:
    """This machine's apt reading only ETC's sources (`apt-get indextargets` parses every entry)."""
    lists = etc.parent / "lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    options = [f"Dir::Etc::SourceList={etc}/sources.list", f"Dir::Etc::SourceParts={etc}/sources.list.d",
               f"Dir::State::Lists={lists}"]  # fmt: skip
    argv = ["apt-get"] + [a for o in options for a in ("-o", o)] + ["indextargets"]
    return subprocess.run(argv, capture_output=True, text=True)


def keyring_list(keyring: Path, url: str = NVIDIA) -> str:
    """cuda-keyring's line as recorded, its keyring path replaced by KEYRING (a test cannot write /usr)."""
    recorded = (RECORDED / "cuda-debian12-x86_64.list").read_text()
    assert recorded == f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {NVIDIA}/ /\n"
    return recorded.replace("/usr/share/keyrings/cuda-archive-keyring.gpg", str(keyring)).replace(NVIDIA, url)


def own_sources(keyring: Path) -> str:
    """What deb822_repository wrote in an earlier gpuprov run."""
    return f"X-Repolib-Name: nvidia-cuda\nTypes: deb\nURIs: {NVIDIA}/\nSuites: /\nSigned-By: {keyring}\n"


def converge(etc: Path, keys: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    own = etc / "sources.list.d" / "nvidia-cuda.sources"
    result: dict[str, Any] = APT.converge(str(etc), NVIDIA, keys["fp"], str(own), check_mode)
    return result


def test_gpuprov_entry_then_cuda_keyring_adopts_the_keyring_entry(
    tmp_path: Path, keys: dict[str, Any]
) -> None:
    """The issue's host: bootstrapped (gpuprov's deb822 entry), then NVIDIA's guide (cuda-keyring)."""
    files = {
        "sources.list.d/nvidia-cuda.sources": own_sources(keys["asc"]),
        "sources.list.d/cuda-debian12-x86_64.list": keyring_list(keys["gpg"]),
    }
    etc = apt_tree(tmp_path, files)
    assert "Conflicting values set for option Signed-By" in apt_reads(etc).stderr
    first = converge(etc, keys)
    assert first["adopted"].endswith("/cuda-debian12-x86_64.list") and first["removed_own"]
    assert first["disabled"] == [] and first["changed"]
    assert not (etc / "sources.list.d" / "nvidia-cuda.sources").exists()
    assert (etc / "sources.list.d" / "cuda-debian12-x86_64.list").read_text() == keyring_list(keys["gpg"])
    assert apt_reads(etc).returncode == 0
    assert converge(etc, keys)["changed"] is False


def test_unverified_entries_of_every_kind_are_disabled(tmp_path: Path, keys: dict[str, Any]) -> None:
    """cuda-keyring's list with another key, a trusted=yes line over plain http, a deb822 stanza without
    Signed-By and one holding the verified key but trusted: none is kept; gpuprov's entry will be."""
    files = {
        "sources.list": f"deb http://deb.debian.org/debian bookworm main\ndeb [trusted=yes] {NVIDIA} /\n",
        "sources.list.d/cuda-debian12-x86_64.list": keyring_list(keys["other"]),
        "sources.list.d/hand.sources": (
            f"Types: deb\nURIs: {NVIDIA}/\nSuites: /\n\n"
            f"Types: deb\nURIs: {NVIDIA.replace('https', 'http')}\nSuites: /\nSigned-By: {keys['asc']}\n"
            "Trusted: yes\nEnabled: yes\n"
        ),
    }
    etc = apt_tree(tmp_path, files)
    first = converge(etc, keys)
    assert first["adopted"] == "" and len(first["disabled"]) == 4
    sources = (etc / "sources.list").read_text().splitlines()
    assert sources[0] == "deb http://deb.debian.org/debian bookworm main"  # another repository: untouched
    assert sources[1] == f"# Disabled by gpuprov (nvidia_repository): deb [trusted=yes] {NVIDIA} /"
    assert (etc / "sources.list.d" / "cuda-debian12-x86_64.list").read_text().startswith("# Disabled")
    hand = (etc / "sources.list.d" / "hand.sources").read_text()
    assert hand.count("\nEnabled: no\n") == 2 and "Enabled: yes" not in hand
    (etc / "sources.list.d" / "nvidia-cuda.sources").write_text(
        own_sources(keys["asc"])
    )  # the role's next step
    assert apt_reads(etc).returncode == 0, apt_reads(etc).stderr
    assert converge(etc, keys)["changed"] is False


def test_a_verified_hand_written_entry_is_adopted_and_duplicates_go(
    tmp_path: Path, keys: dict[str, Any]
) -> None:
    """A deb822 stanza with the verified key inline is kept; a second verified line is a duplicate; a stanza
    that names another repository too keeps that one."""
    inline = "\n".join(" " + (line or ".") for line in keys["asc"].read_text().splitlines())
    files = {
        "sources.list.d/a.sources": f"Types: deb\nURIs: {NVIDIA}/\nSuites: /\nSigned-By:\n{inline}\n",
        "sources.list.d/b.list": keyring_list(keys["gpg"]),
        "sources.list.d/c.sources": f"Types: deb\nURIs: http://other.example/x {NVIDIA}\nSuites: /\n",
    }
    etc = apt_tree(tmp_path, files)
    first = converge(etc, keys)
    assert first["adopted"].endswith("/a.sources") and len(first["disabled"]) == 2
    assert "URIs: http://other.example/x\n" in (etc / "sources.list.d" / "c.sources").read_text()
    assert apt_reads(etc).returncode == 0, apt_reads(etc).stderr
    assert converge(etc, keys)["changed"] is False


def test_check_mode_reports_and_writes_nothing(tmp_path: Path, keys: dict[str, Any]) -> None:
    files = {"sources.list.d/nvidia-cuda.sources": own_sources(keys["asc"]),
             "sources.list.d/x.list": f"deb {NVIDIA}/ /\n"}  # fmt: skip
    etc = apt_tree(tmp_path, files)
    before = {p: p.read_text() for p in etc.rglob("*") if p.is_file()}
    assert converge(etc, keys, check_mode=True)["changed"] is True
    assert {p: p.read_text() for p in etc.rglob("*") if p.is_file()} == before


def test_a_hand_added_cuda_rhel9_repo_and_a_duplicate_id_are_commented_out(tmp_path: Path) -> None:
    repos = tmp_path / "yum.repos.d"
    repos.mkdir()
    own = repos / "nvidia-cuda.repo"
    own.write_text(f"[nvidia-cuda]\nname=NVIDIA CUDA repository (rhel9)\nbaseurl={RHEL9}\ngpgcheck=1\n")
    (repos / "cuda-rhel9.repo").write_text((RECORDED / "cuda-rhel9.repo").read_text())
    (repos / "site.repo").write_text(
        "[baseos]\nname=BaseOS\nbaseurl=https://mirror.example/9/BaseOS\n\n"
        "[nvidia-cuda]\nname=copy\nbaseurl=https://mirror.example/cuda\ngpgcheck=0\n\n"
        "[cuda-http]\nbaseurl=http://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/\n"
        "gpgcheck=0\n"
    )
    first = YUM.converge(str(repos), RHEL9, "nvidia-cuda", str(own), False)
    assert sorted(first["disabled"]) == [
        f"{repos}/cuda-rhel9.repo [cuda-rhel9-x86_64]", f"{repos}/site.repo [cuda-http]",
        f"{repos}/site.repo [nvidia-cuda]",
    ]  # fmt: skip
    assert all(
        line.startswith("# Disabled by gpuprov")
        for line in (repos / "cuda-rhel9.repo").read_text().splitlines()
    )
    assert (repos / "site.repo").read_text().startswith("[baseos]\nname=BaseOS\n")
    assert own.read_text().startswith("[nvidia-cuda]\n")
    assert YUM.converge(str(repos), RHEL9, "nvidia-cuda", str(own), False)["changed"] is False
