"""The slurm role refuses an srun port range (SrunPortRange) that overlaps the kernel's ephemeral range,
which network_tuning sets (net.ipv4.ip_local_port_range): a port srun wants could already be an outgoing
connection's. The defaults of the two roles must not overlap."""

from __future__ import annotations

import pytest
import yaml

from tests.local.roles.local_play import ROLES, CaseResult, role_task, run_cases

CASES = {  # case: (slurm_srun_port_range, slurm_ephemeral_ports, refused)
    "defaults": ("61001-64000", "32768-60999", False),
    "below": ("20000-29000", "32768-60999", False),
    "old-default": ("60001-63000", "32768-60999", True),
    "inside": ("40000-41000", "32768-60999", True),
    "around": ("30000-62000", "32768-60999", True),
    "touching": ("60999-62000", "32768-60999", True),
    "tuned-lower": ("60001-63000", "32768-59999", False),
    "not-a-range": ("61001", "32768-60999", True),
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    task = role_task("slurm", "preflight.yml", "Check that srun's ports lie outside")
    cases = {
        name: {"slurm_srun_port_range": srun, "slurm_ephemeral_ports": ephemeral}
        for name, (srun, ephemeral, _) in CASES.items()
    }
    return run_cases(tmp_path_factory.mktemp("srun-ports"), [task], cases)


@pytest.mark.parametrize("case", [name for name, (_, _, refused) in CASES.items() if refused])
def test_overlapping_or_malformed_ranges_are_refused_in_one_line(
    checked: dict[str, CaseResult], case: str
) -> None:
    srun, ephemeral, _ = CASES[case]
    result = checked[case]
    assert result.failed
    assert f"{case}: slurm_srun_port_range ({srun}) must be a range FIRST-LAST outside" in result.output
    assert f"ephemeral ports ({ephemeral}:" in result.output


@pytest.mark.parametrize("case", [name for name, (_, _, refused) in CASES.items() if not refused])
def test_separate_ranges_pass(checked: dict[str, CaseResult], case: str) -> None:
    assert not checked[case].failed, checked[case].output


def test_the_roles_defaults_do_not_overlap() -> None:
    slurm = yaml.safe_load((ROLES / "slurm" / "defaults" / "main.yml").read_text())
    tuning = yaml.safe_load((ROLES / "network_tuning" / "defaults" / "main.yml").read_text())
    # slurm_ephemeral_ports follows network_tuning_ephemeral_ports; its fallback is network_tuning's default.
    assert f"default('{tuning['network_tuning_ephemeral_ports']}')" in slurm["slurm_ephemeral_ports"]
    srun_first, srun_last = (int(p) for p in slurm["slurm_srun_port_range"].split("-"))
    eph_first, eph_last = (int(p) for p in tuning["network_tuning_ephemeral_ports"].split("-"))
    assert srun_first > eph_last or srun_last < eph_first
