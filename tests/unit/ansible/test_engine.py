"""engine.run_playbook for a verb that is not bootstrap: its playbook, its words on screen, its run record.

ansible-runner is replaced by a stand-in that feeds the tracker a few events, so these tests run no Ansible.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuprov.ansible import engine, runs
from gpuprov.ansible.arguments import Options
from gpuprov.errors import EnvironmentProblem, ExitCode, GpuprovError
from tests.unit.ansible import runner_stand_in
from tests.unit.ansible.runner_stand_in import Events


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUPROV_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def options(tmp_path: Path) -> Options:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu_nodes]\nnode1 ansible_host=192.0.2.10\nnode2 ansible_host=192.0.2.11\n")
    return Options(inventory=inventory)


@pytest.fixture
def playbook(tmp_path: Path) -> Path:
    path = tmp_path / "upgrade.yml"
    path.write_text("- hosts: all\n  tasks: []\n")
    return path


def ok_events(*hosts: str) -> Events:
    return [
        ("playbook_on_play_start", {"play": "Upgrade"}),
        *(
            ("runner_on_ok", {"host": host, "task": "Upgrade the driver", "res": {"changed": True}})
            for host in hosts
        ),
        ("playbook_on_stats", {"ok": dict.fromkeys(hosts, 1), "changed": dict.fromkeys(hosts, 1)}),
    ]


def test_a_verb_runs_its_playbook_and_its_record_names_it(
    state: Path,
    options: Options,
    playbook: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen = runner_stand_in.install(monkeypatch, ok_events("node1", "node2"))
    summary = engine.run_playbook("upgrade", playbook, options)
    (kwargs,) = seen
    assert (kwargs["project_dir"], kwargs["playbook"]) == (str(playbook.parent), "upgrade.yml")
    assert summary["verb"] == "upgrade" and summary["status"] == "ok" and summary["exit_code"] == 0
    assert summary["playbook"] == str(playbook)
    assert sorted(summary["hosts"]) == ["node1", "node2"]
    run_dir = Path(summary["run_dir"])
    assert run_dir.parent == runs.runs_dir()
    assert json.loads((run_dir / runs.SUMMARY).read_text()) == summary
    assert runs.read_summary(run_dir, legacy_verb="bootstrap")["verb"] == "upgrade"
    assert "gpuprov upgrade: inventory" in (run_dir / runs.LOG).read_text()
    err = capsys.readouterr().err
    assert "Upgrade finished on 2 host(s)" in err
    assert "Bootstrap" not in err and "bootstrap" not in err


def test_a_failed_host_fails_the_run_in_the_verbs_words(
    state: Path, options: Options, playbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: Events = [
        ("runner_on_ok", {"host": "node1", "task": "Upgrade the driver", "res": {}}),
        ("runner_on_failed", {"host": "node2", "task": "Upgrade the driver", "res": {"msg": "no package"}}),
    ]
    runner_stand_in.install(monkeypatch, events, rc=2)
    with pytest.raises(GpuprovError) as raised:
        engine.run_playbook("upgrade", playbook, options)
    assert raised.value.exit_code == ExitCode.HOSTS_FAILED
    assert str(raised.value).startswith("upgrade failed on 1 of 2 host(s): node2; run log:")
    (run_dir,) = runs.runs_dir().iterdir()
    record = runs.read_summary(run_dir, legacy_verb="bootstrap")
    assert (record["verb"], record["status"], record["exit_code"]) == (
        "upgrade",
        "failed",
        ExitCode.HOSTS_FAILED,
    )


def test_the_verbs_checks_run_first_and_can_stop_the_run(
    state: Path, options: Options, playbook: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = runner_stand_in.install(monkeypatch, ok_events("node1", "node2"))

    def checks(run: engine.Run) -> None:
        assert (run.verb, run.inventory.names, run.extravars) == ("upgrade", ["node1", "node2"], {"a": "1"})
        run.summary["drained"] = False
        run.finish("not_drained", ExitCode.PREFLIGHT_FAILED)
        raise GpuprovError("node1 still runs jobs; nothing was applied", ExitCode.PREFLIGHT_FAILED)

    with pytest.raises(GpuprovError, match="still runs jobs"):
        engine.run_playbook(
            "upgrade", playbook, Options(inventory=options.inventory, extra_vars=("a=1",)), checks=checks
        )
    assert seen == []  # Ansible never started
    (run_dir,) = runs.runs_dir().iterdir()
    record = runs.read_summary(run_dir, legacy_verb="bootstrap")
    assert (record["verb"], record["status"], record["drained"]) == ("upgrade", "not_drained", False)


def test_bad_input_is_refused_before_a_run_directory(
    state: Path, options: Options, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = runner_stand_in.install(monkeypatch, [])
    with pytest.raises(EnvironmentProblem, match=r"missing\.yml is missing"):
        engine.run_playbook("upgrade", tmp_path / "missing.yml", options)
    with pytest.raises(GpuprovError, match="give KEY=VALUE"):
        engine.run_playbook(
            "upgrade", tmp_path / "missing.yml", Options(inventory=options.inventory, extra_vars=("x",))
        )
    assert seen == [] and not runs.runs_dir().exists()


def test_records_written_before_the_verb_field_read_as_the_legacy_verb(tmp_path: Path) -> None:
    old = tmp_path / "20250101-000000-abcdef"
    old.mkdir()
    (old / runs.SUMMARY).write_text(json.dumps({"run_id": old.name, "status": "ok"}))
    assert runs.read_summary(old, legacy_verb="bootstrap") == {
        "run_id": old.name,
        "status": "ok",
        "verb": "bootstrap",
    }
