"""network_tuning's preflight: its firewall rules admit IPv4 only, so with the role managing the firewall NCCL
is kept to IPv4 (NCCL_SOCKET_FAMILY=AF_INET) and an IPv6 source is refused, in one line naming the host;
with network_tuning_firewall: none, any family NCCL knows is allowed."""

from __future__ import annotations

import pytest

from tests.local.roles.local_play import CaseResult, role_task, run_cases

CASES = {  # case: (firewall, socket family, sources, refused)
    "default": ("auto", "AF_INET", [], False),
    "ipv4-networks": ("firewalld", "AF_INET", ["10.10.0.0/16"], False),
    "ipv6-family": ("auto", "AF_INET6", [], True),
    "nccl-chooses": ("ufw", "", [], True),
    "ipv6-source": ("auto", "AF_INET", ["fd00:10::/64"], True),
    "no-firewall-ipv6": ("none", "AF_INET6", [], False),
    "no-firewall-any": ("none", "", [], False),
    "not-a-family": ("none", "ipv4", [], True),
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    task = role_task("network_tuning", "preflight.yml", "Check the firewall and NCCL's socket family")
    cases = {
        name: {
            "network_tuning_firewall": firewall,
            "network_tuning_nccl_socket_family": family,
            "network_tuning_firewall_sources": sources,
        }
        for name, (firewall, family, sources, _) in CASES.items()
    }
    return run_cases(tmp_path_factory.mktemp("socket-family"), [task], cases)


@pytest.mark.parametrize("case", list(CASES))
def test_the_firewall_and_the_socket_family_agree(checked: dict[str, CaseResult], case: str) -> None:
    refused = CASES[case][3]
    assert checked[case].failed is refused, checked[case].output
    if refused:
        assert f"{case}: network_tuning opens the firewall to IPv4 addresses only" in checked[case].output
