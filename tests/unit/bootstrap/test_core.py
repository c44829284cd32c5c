"""The bootstrap verb on the Ansible engine: site.yml, its preflight first, runs recorded as "bootstrap".

preflight.run and ansible-runner are replaced by stand-ins, so these tests reach no host and run no Ansible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from gpuprov import host_preflight as preflight
from gpuprov import hosts
from gpuprov.ansible import runs
from gpuprov.ansible.arguments import Options
from gpuprov.bootstrap import core, drift_probe
from gpuprov.errors import ExitCode, GpuprovError
from tests.unit.ansible import runner_stand_in


def stand_ins(monkeypatch: pytest.MonkeyPatch, problems: dict[str, str]) -> list[Mapping[str, Any]]:
    """preflight.run finds `problems` (host -> message); Ansible (a stand-in) finds every host ok."""

    def check(inventory: hosts.Inventory, extravars: Mapping[str, Any], also: Any = None) -> Any:
        reports = [
            preflight.HostReport(
                name,
                "Debian GNU/Linux 12",
                (preflight.Problem(name, "become", problems[name]),) if name in problems else (),
            )
            for name in inventory.names
        ]
        return reports, []

    monkeypatch.setattr(preflight, "run", check)
    # The drift check's probe after the run reaches no host either (tests/unit/bootstrap/test_drift_run.py).
    monkeypatch.setattr(drift_probe, "run_alone", lambda host, extravars: "no host in this test")
    ok = [("runner_on_ok", {"host": name, "task": "t", "res": {}}) for name in ("node1", "node2")]
    return runner_stand_in.install(monkeypatch, ok)


def test_bootstrap_applies_site_yml_after_its_preflight(
    options: Options, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = stand_ins(monkeypatch, {})
    summary = core.run(options)
    (kwargs,) = seen
    assert kwargs["playbook"] == "site.yml"
    assert summary["verb"] == "bootstrap" and summary["status"] == "ok"
    assert summary["preflight"]["hosts"]["node1"] == {
        "os": "Debian GNU/Linux 12",
        "gpus": [],
        "problems": [],
        "warnings": [],
    }
    err = capsys.readouterr().err
    assert (
        err.index("Preflight ok on 2 host(s)")
        < err.index("Applying site.yml")
        < err.index("Bootstrap finished on 2 host(s)")
    )


def test_a_preflight_problem_stops_bootstrap_before_ansible(
    options: Options, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = stand_ins(monkeypatch, {"node2": "sudo needs a password"})
    with pytest.raises(GpuprovError) as raised:
        core.run(options)
    assert raised.value.exit_code == ExitCode.PREFLIGHT_FAILED
    assert str(raised.value).endswith("sudo needs a password; nothing was applied to any host")
    assert seen == []
    (run_dir,) = runs.runs_dir().iterdir()
    record = runs.read_summary(run_dir, legacy_verb="none")
    assert (record["verb"], record["status"]) == ("bootstrap", "preflight_failed")


def test_a_lock_past_its_branch_end_of_life_warns_and_bootstrap_goes_on(
    options: Options, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuprov.sandbox.inventory import SANDBOX_LOCK

    stand_ins(monkeypatch, {})
    lock_file = options.inventory.parent / "lock.yml"
    r550 = {**SANDBOX_LOCK, "driver_branch": "550", "driver_version": "550.127.08"}  # end of life by 2025-07
    lock_file.write_text(yaml.safe_dump({"gpu_stack": r550}))
    options = Options(inventory=options.inventory, extra_vars=(f"@{lock_file}",))
    summary = core.run(options)
    assert summary["status"] == "ok"
    (warning,) = summary["preflight"]["lock_warnings"]  # two hosts, one lock: one warning
    assert warning.startswith("driver_branch 550 (production branch) reached its end of life by July 2025")
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: driver_branch 550 (production branch) reached its end of life by July 2025" in err
    (run_dir,) = runs.runs_dir().iterdir()
    assert "preflight warning: driver_branch 550" in (run_dir / "gpuprov.log").read_text()
