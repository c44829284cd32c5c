"""launch's joints: the registries the CLI and job records choose from, and a launcher plugged in."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.errors import BadInput
from gpuprov.launch import environments, jobs, launchers, options, plan, preflight, schedulers
from gpuprov.launch.render import HostCommand, SbatchJob


def _job(**fields: object) -> jobs.Job:
    return jobs.Job(id="20250101-000000-abcd", script="x.py", args=[], hosts=[], master="m:1", detach=False,
                    grace_s=5.0, **fields)  # type: ignore[arg-type]  # fmt: skip


def test_scheduler_choices_are_the_registry() -> None:
    assert schedulers.NAMES == ("ssh", "slurm") and options.SCHEDULERS == schedulers.NAMES
    assert schedulers.by_name("slurm").name == "slurm"


def test_a_record_goes_back_to_the_scheduler_that_started_it() -> None:
    assert schedulers.of_job(_job()).name == "ssh"  # records written before schedulers existed too
    assert schedulers.of_job(_job(slurm_job_id="42", slurm_controller="ctl")).name == "slurm"


def test_every_launchers_reserved_variables_are_refused_by_env() -> None:
    for launcher in launchers.LAUNCHERS.values():
        assert set(launcher.reserved_env) <= set(options.RESERVED_ENV)
    assert "run_torchrun.py" in launchers.by_name("torchrun").host_files()


def test_the_default_environment_is_the_hosts_python_env() -> None:
    env = environments.by_name(environments.DEFAULT)
    assert env.name == "host-python" and env.default_python == "/opt/gpuprov/envs/train/bin/python"


class _Echo:
    """A launcher of the test's own: what plan takes from a launcher, and nothing more."""

    name = "echo"
    template_variable = "gpuprov_echo_template"
    reserved_env: tuple[str, ...] = ("ECHO_MARK",)

    def host_files(self) -> dict[str, bytes]:
        return {}

    def job_env(self) -> dict[str, str]:
        return {"ECHO_MARK": "1"}

    def peers_env(self, envs: list[dict[str, str]], checks: list[preflight.HostCheck]) -> dict[str, str]:
        return {"ECHO_HOSTS": str(len(envs))}

    def host_script(self, command: HostCommand, template: Path | None) -> str:
        return f"echo {command.host} {command.node_rank}\n"

    def sbatch_script(self, job: SbatchJob) -> str:
        return ""


def test_plan_builds_each_hosts_part_for_the_launcher_it_is_given() -> None:
    host = hosts.Host("node1", "10.0.0.1", 22, "u", None, Path("/k"), vars={"gpuprov_echo_template": "/nope"})
    check = preflight.HostCheck(host, python="/py", gpus=0, nproc=1)
    opts = options.LaunchOptions(script=Path("/tmp/x.py"), env={"A": "1"})
    commands = plan.build_commands("20250101-000000-abcd", opts, [check], "10.0.0.1", 29500, "x.py", _Echo())
    assert list(commands["node1"].env)[-2:] == ["ECHO_MARK", "ECHO_HOSTS"]  # the launcher's come last
    assert "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE" not in commands["node1"].env
    assert _Echo().host_script(commands["node1"], None) == "echo node1 0\n"
    # A host's own template is named by the launcher's inventory variable.
    with pytest.raises(BadInput, match="node1: gpuprov_echo_template /nope does not exist"):
        plan.template_for(opts, host, _Echo())
