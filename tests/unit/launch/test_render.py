"""The per-host torchrun script and the sbatch script: exact content, valid bash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuprov import hosts
from gpuprov.errors import BadInput
from gpuprov.launch import options, plan, preflight, render, sbatch
from gpuprov.launch.launchers.torchrun import Torchrun
from tests.unit.launch.test_interfaces import route

TORCHRUN = Torchrun()


def _check(name: str, gpus: int, nproc: int, **vars: str) -> preflight.HostCheck:
    host = hosts.Host(name, f"10.0.0.{name[-1]}", 22, "u", None, Path("/k"), vars=dict(vars))
    check = preflight.HostCheck(host, python="/opt/gpuprov/envs/train/bin/python", gpus=gpus, nproc=nproc)
    check.route = route(source=host.address, interfaces=["lo", "eth0", "ib0"])
    return check


def _commands(rdzv: str = "static", **opt_kwargs: object) -> dict[str, render.HostCommand]:
    opts = options.LaunchOptions(
        script=Path("/tmp/x.py"),
        script_args=("--epochs", "2", "a b"),
        rdzv=rdzv,
        max_restarts=1,
        **opt_kwargs,
    )  # type: ignore[arg-type]
    checks = [
        _check("node1", 0, 1, gloo_socket_ifname="eth0"),
        _check("node2", 8, 8, nccl_socket_ifname="ib0"),
    ]
    return plan.build_commands("20250101-000000-abcd", opts, checks, "10.0.0.1", 29501, "sub/x.py")


def test_command_building_per_host() -> None:
    commands = _commands(env={"FOO": "bar baz"})
    first, second = commands["node1"], commands["node2"]
    assert (first.node_rank, first.nnodes, first.nproc) == (0, 2, 1)
    assert (second.node_rank, second.nnodes, second.nproc) == (1, 2, 8)
    assert first.env["GLOO_SOCKET_IFNAME"] == "eth0" and "NCCL_SOCKET_IFNAME" not in first.env
    # A host's NCCL interface is also gloo's unless it names one for gloo.
    assert second.env["NCCL_SOCKET_IFNAME"] == "ib0" and second.env["GLOO_SOCKET_IFNAME"] == "ib0"
    for cmd in commands.values():
        assert cmd.env["FOO"] == "bar baz"
        assert cmd.env["GPUPROV_JOB_ID"] == "20250101-000000-abcd"
        assert cmd.env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[rank${rank}]:"
        assert cmd.job_dir == ".gpuprov/jobs/20250101-000000-abcd"


def test_static_script_content() -> None:
    text = TORCHRUN.host_script(_commands(env={"FOO": "bar baz"})["node2"], None)
    assert 'cd "$HOME"/.gpuprov/jobs/20250101-000000-abcd/work' in text
    assert "export FOO='bar baz'" in text
    assert "export TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank${rank}]:'" in text
    assert (
        'exec /opt/gpuprov/envs/train/bin/python "$HOME"/.gpuprov/jobs/20250101-000000-abcd/run_torchrun.py'
        in text
    )
    for flag in ("--nnodes 2", "--nproc-per-node 8", "--node-rank 1", "--master-addr 10.0.0.1",
                 "--master-port 29501", "--max-restarts 1", "--tee 3",
                 '--log-dir "$HOME"/.gpuprov/jobs/20250101-000000-abcd/ranks'):  # fmt: skip
        assert flag in text, flag
    assert "--rdzv-backend" not in text
    assert text.rstrip().endswith("sub/x.py --epochs 2 'a b'")
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_c10d_script_content() -> None:
    text = TORCHRUN.host_script(_commands(rdzv="c10d")["node1"], None)
    assert "--rdzv-backend c10d" in text
    assert "--rdzv-endpoint 10.0.0.1:29501" in text
    assert "--rdzv-id 20250101-000000-abcd" in text
    assert "--node-rank" not in text and "--master-addr" not in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


@pytest.mark.parametrize("rdzv", ["static", "c10d"])
def test_a_second_job_on_a_taken_port_cannot_join_the_first(rdzv: str) -> None:
    """Issue 28, item 9: a job whose preflight raced another job's to the same --master-port. The
    rendezvous is the job's own (--rdzv-id), and with c10d only the master hosts the store: where the port
    is taken, it fails (is_host=1) instead of becoming a client of the other job's store (torch's
    c10d_rendezvous_backend._create_tcp_store retries as a client when is_host was only guessed)."""
    commands = _commands(rdzv=rdzv)
    for name, is_host in (("node1", 1), ("node2", 0)):
        text = TORCHRUN.host_script(commands[name], None)
        assert "--rdzv-id 20250101-000000-abcd " in text
        assert (f"--rdzv-conf is_host={is_host} " in text) == (rdzv == "c10d")


def test_user_template(tmp_path: Path) -> None:
    template = tmp_path / "mine.sh.j2"
    template.write_text("echo {{ host }} {{ node_rank }} {{ nproc }} {{ script | q }}\n")
    text = TORCHRUN.host_script(_commands()["node2"], template)
    assert text == "echo node2 1 8 sub/x.py\n"


def test_user_template_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.j2"
    broken.write_text("{% if %}\n")
    with pytest.raises(BadInput, match=r"broken\.j2 line 1"):
        TORCHRUN.host_script(_commands()["node1"], broken)
    unknown = tmp_path / "unknown.j2"
    unknown.write_text("{{ no_such_variable }}\n")
    with pytest.raises(BadInput, match="no_such_variable"):
        TORCHRUN.host_script(_commands()["node1"], unknown)


def test_sbatch_content(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    opts = options.build(
        script=str(script), nodes=4, nproc="gpu", env=("A=1 2",), master_port=29600,
        emit_sbatch=str(tmp_path / "job.sbatch"), script_args=("--epochs", "3"),
    )  # fmt: skip
    path = sbatch.write(opts, ["--nodes", "4", str(script)])
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "#SBATCH --nodes=4" in text and "#SBATCH --ntasks-per-node=1" in text
    assert "srun --kill-on-bad-exit=1" in text
    assert '--nproc-per-node "${SLURM_GPUS_ON_NODE:-1}"' in text
    assert '--rdzv-endpoint "$head_addr:29600"' in text and "--rdzv-backend c10d" in text
    # The first node's address as Slurm has it (scontrol show node), never a fallback.
    assert 'head_addr=$(scontrol show node "$head_node"' in text
    assert "export A='1 2'" in text
    assert f"--chdir={tmp_path}" in text
    assert text.rstrip().endswith("train.py --epochs 3")
    assert path.stat().st_mode & 0o100
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_sbatch_fixed_nproc(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    opts = options.build(script=str(script), nodes=2, nproc="2", emit_sbatch=str(tmp_path / "s.sh"))
    text = sbatch.build(opts, [])
    assert "#SBATCH --nodes=2" in text and "--nproc-per-node 2 " in text


@pytest.mark.parametrize("rdzv", ["static", "c10d"])
def test_c10d_publishes_the_address_the_peers_reach_each_host_on(rdzv: str) -> None:
    """torchrun's c10d rendezvous publishes --local-addr, else the FQDN (127.0.1.1 on a stock Debian/Ubuntu
    host); static rendezvous uses --master-addr alone."""
    commands = _commands(rdzv=rdzv)
    for name in ("node1", "node2"):
        text = TORCHRUN.host_script(commands[name], None)
        assert (f"--local-addr 10.0.0.{name[-1]} " in text) == (rdzv == "c10d")
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
