"""The roles `gpuprov upgrade` passes as --tags select, in Ansible's own listing of site.yml
(`ansible-playbook --list-tasks`): the preflight always, a role with the roles it depends on, the reboot only
with the driver, and nothing of the other roles."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gpuprov import lock_changes, resources
from gpuprov.ansible import arguments

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def listed(tmp_path: Path, roles: list[str]) -> tuple[list[str], set[str]]:
    """The plays and the roles whose tasks a run with `--tags roles --skip-tags slurm` would run."""
    inventory = ROOT / "inventory" / "sample" / "inventory.ini"
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--list-tasks", "--tags", ",".join(roles), "--skip-tags", "slurm",
         "-i", str(inventory), str(arguments.playbook_path("site.yml"))],
        env={"PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin", "HOME": str(tmp_path),
             "ANSIBLE_ROLES_PATH": str(resources.data_dir("roles"))},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plays, ran, current = [], set(), ""
    for line in proc.stdout.splitlines():
        if play := re.match(r"\s*play #\d+ \([^)]*\): (.*?)\tTAGS", line):
            current = play.group(1)
        elif task := re.match(r"\s{6}(?:(\w+) : )?\S.*\tTAGS", line):
            if current not in plays:
                plays.append(current)
            ran.add(task.group(1) or "-")
    return plays, ran


def test_a_driver_change_runs_the_preflight_the_driver_its_dependencies_and_the_reboot(
    tmp_path: Path,
) -> None:
    plays, ran = listed(tmp_path, ["nvidia_driver"])
    assert plays[0] == "Check the inventory and the compatibility lock before touching any host"
    assert plays[1].startswith("Check that NVIDIA's repository for each host's OS carries the locked CUDA")
    assert "Reboot marked hosts in batches and check the driver afterwards" in plays
    assert ran - {"-"} == {"gpuprov_platform", "nvidia_repository", "nvidia_driver"}


def test_a_library_change_runs_no_driver_task_and_no_reboot(tmp_path: Path) -> None:
    plays, ran = listed(tmp_path, lock_changes.batch_roles([["python_env"], ["nccl"]]))
    assert not any(play.startswith("Reboot") for play in plays)
    assert ran - {"-"} == {"gpuprov_platform", "nvidia_repository", "nccl", "python_env"}
