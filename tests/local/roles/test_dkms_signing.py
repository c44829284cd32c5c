"""nvidia_driver refuses Secure Boot signing on a dkms older than 3.0.4 (tasks/dkms-signing.yml, the "Note"
and "Refuse" tasks run on localhost against `dkms --version` outputs): dkms reads mok_signing_key,
mok_certificate and /etc/dkms/framework.conf.d/ only from 3.0.4 on (dell/dkms, tag v3.0.4), and Ubuntu
20.04/22.04 ship 2.8.x, so there the setting would be ignored and the modules built unsigned."""

from __future__ import annotations

import pytest
import yaml

from gpuprov import resources
from tests.local.roles.local_play import CaseResult, run_cases

TASKS = resources.data_dir("roles") / "nvidia_driver" / "tasks" / "dkms-signing.yml"


OLDER = ["dkms-2.8.1", "dkms-2.8.7", "dkms-3.0.3"]
NEWER = ["dkms-3.0.4", "dkms-3.0.10", "dkms-3.0.11"]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseResult]:
    """The two tasks for every `dkms --version` answer below, in one ansible-playbook run (run_cases: the
    answer is the only input, registered by an earlier task in the role)."""
    tasks = [
        t
        for t in yaml.safe_load(TASKS.read_text())
        if t["name"].startswith(("Note the DKMS", "Refuse a DKMS"))
    ]
    assert len(tasks) == 2
    cases = {
        says: {"__nvidia_driver_dkms_version_out": {"rc": 0, "stdout": says, "stderr": ""}}
        for says in OLDER + NEWER
    }
    return run_cases(tmp_path_factory.mktemp("dkms"), tasks, cases)


@pytest.mark.parametrize("dkms_says", OLDER)
def test_an_older_dkms_is_refused_naming_its_version(checked: dict[str, CaseResult], dkms_says: str) -> None:
    result = checked[dkms_says]
    assert result.failed
    assert f"its dkms ({dkms_says.removeprefix('dkms-')}) is older than 3.0.4" in result.output


@pytest.mark.parametrize("dkms_says", NEWER)
def test_dkms_3_0_4_and_newer_pass(checked: dict[str, CaseResult], dkms_says: str) -> None:
    result = checked[dkms_says]
    assert not result.failed, result.output[-2000:]
