"""network_tuning's RDMA tasks on a host with and without MLNX_OFED/DOCA-OFED, run by Ansible from the role's
own task file: an `ofed_info -s` that answers (a stand-in printing MLNX_OFED's one-line form,
`MLNX_OFED_LINUX-23.10-5.1.4.0:`, as MLNX_OFED 23.10 prints it) keeps the distribution's packages off."""

from __future__ import annotations

from pathlib import Path

from .plugins import role_task, run_plays

FILE = "rdma.yml"


def _plays(tmp_path: Path) -> list[dict[str, object]]:
    install = role_task("network_tuning", FILE, "Install the RDMA userspace")
    # The package task would install on this machine: its condition on a debug says whether it runs.
    would_install = {
        "name": "Would install",
        "ansible.builtin.debug": {"msg": "INSTALL"},
        "when": install["when"],
    }
    tasks = [
        role_task("network_tuning", FILE, "Look for an MLNX_OFED or DOCA-OFED stack"),
        would_install,
        role_task("network_tuning", FILE, "Report that the OFED stack is left alone"),
    ]
    return [{"tasks": tasks}]


def test_without_ofed_the_distribution_packages_install(tmp_path: Path) -> None:
    out = run_plays(_plays(tmp_path), tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert '"msg": "INSTALL"' in out and "is used as it is" not in out


def test_with_ofed_its_stack_is_left_alone(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ofed_info").write_text('#!/bin/sh\n[ "$1" = -s ] && echo "MLNX_OFED_LINUX-23.10-5.1.4.0:"\n')
    (bin_dir / "ofed_info").chmod(0o755)
    out = run_plays(_plays(tmp_path), tmp_path, env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert '"msg": "INSTALL"' not in out
    assert (
        "localhost has MLNX_OFED_LINUX-23.10-5.1.4.0 (ofed_info): its RDMA userspace is used as it is" in out
    )
