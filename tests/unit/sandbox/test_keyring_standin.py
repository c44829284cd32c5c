"""The stand-ins of NVIDIA's repository entries (gpuprov.sandbox.standins.keyring) against the recorded real
ones (tests/recorded/nvidia-repository/): the same bytes once NVIDIA's host is put back for the mirror's."""

from __future__ import annotations

from pathlib import Path

from gpuprov.sandbox.standins import keyring

RECORDED = Path(__file__).parents[2] / "recorded" / "nvidia-repository"


def test_cuda_keyring_list_is_nvidias_line_with_the_mirror_url() -> None:
    real = (RECORDED / "cuda-debian12-x86_64.list").read_text()
    assert keyring.sources_line("debian12", base_url=keyring.NVIDIA_REPOS_URL) == real
    standin = keyring.sources_line("debian12")
    assert standin == real.replace(keyring.NVIDIA_REPOS_URL, "http://mirror/cuda/repos")
    assert keyring.sources_file("debian12") == "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"


def test_cuda_rhel9_repo_is_nvidias_file_with_the_mirror_url() -> None:
    real = (RECORDED / "cuda-rhel9.repo").read_text()
    assert keyring.repo_file("rhel9", "D42D0685.pub", base_url=keyring.NVIDIA_REPOS_URL) == real
    standin = keyring.repo_file("rhel9", "0123abcd.pub")
    expected = real.replace(keyring.NVIDIA_REPOS_URL, keyring.SANDBOX_REPOS_URL).replace(
        "D42D0685", "0123abcd"
    )
    assert standin == expected
    assert keyring.repo_file_name("rhel9") == "cuda-rhel9.repo"
