"""--launcher mpirun's scripts: the exact script of two hosts, valid bash, run against stand-in mpirun and
ssh commands that record what they were given (the hostfile, mpirun's line, the remote daemon's command);
the rank shim run as a real subprocess with Open MPI's variables; the other hosts' standby; the sbatch script.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuprov import hosts, onhost
from gpuprov.errors import BadInput
from gpuprov.launch import options, plan, preflight, render, sbatch, stream
from gpuprov.launch.launchers import mpirun
from gpuprov.launch.launchers.mpirun import Mpirun
from gpuprov.onhost import mpirun_standby
from tests.unit.launch.test_interfaces import route

MPIRUN = Mpirun()
JOB = "20250101-000000-abcd"
PY = "/opt/gpuprov/envs/train/bin/python"


def _commands(**opt_kwargs: object) -> dict[str, render.HostCommand]:
    opts = options.LaunchOptions(
        script=Path("/tmp/x.py"), script_args=("--epochs", "2", "a b"), launcher="mpirun", **opt_kwargs
    )  # type: ignore[arg-type]
    checks = []
    for name in ("node1", "node2"):
        host = hosts.Host(
            name, f"10.0.0.{name[-1]}", 22, "u", None, Path("/k"), vars={"nccl_socket_ifname": "eth0"}
        )
        checks.append(preflight.HostCheck(host, python=PY, gpus=2, nproc=2, route=route(source=host.address)))
    return plan.build_commands(JOB, opts, checks, "10.0.0.1", 29501, "sub/x.py", MPIRUN)


# The scripts as `gpuprov launch --launcher mpirun --dry-run` prints them, byte for byte.
EXPECTED = Path(__file__).parent / "expected_mpirun"


def test_the_exact_scripts_of_two_hosts() -> None:
    commands = _commands(env={"FOO": "bar baz"})
    for name in ("node1", "node2"):
        assert MPIRUN.host_script(commands[name], None) == (EXPECTED / f"{name}.sh").read_text(), name


def test_both_scripts_are_valid_bash(tmp_path: Path) -> None:
    for name, command in _commands(env={"FOO": "it's $HOME"}).items():
        path = tmp_path / f"{name}.sh"
        path.write_text(MPIRUN.host_script(command, None))
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, name


def _stand_in(bin_dir: Path, name: str, record: Path) -> None:
    """A command that writes its arguments, one per line, to record."""
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\nfor a; do printf "%s\\n" "$a"; done > {record}\n')
    path.chmod(0o755)


def _run_first_host(tmp_path: Path, uid: int, mpirun_body: str) -> Path:
    """run.sh as the agent runs it, as a user of that uid (a stand-in `id`), with a stand-in mpirun (a sh
    script of mpirun_body) at the path the mpi role installs (the rendered path swapped for the stand-in's):
    the job's directory."""
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    job_dir = home / ".gpuprov" / "jobs" / JOB
    (job_dir / "work").mkdir(parents=True)
    bin_dir.mkdir()
    for name, body in (("mpirun", mpirun_body), ("id", f"echo {uid}\n")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}")
        (bin_dir / name).chmod(0o755)
    text = MPIRUN.host_script(_commands()["node1"], None)
    script = tmp_path / "run.sh"
    script.write_text(text.replace(mpirun.MPIRUN_PATHS[0], str(bin_dir / "mpirun"), 1))
    env = {"HOME": str(home), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    subprocess.run(["bash", str(script)], check=True, env=env)
    return job_dir


def test_the_first_host_tries_the_mpirun_paths_the_role_installs() -> None:
    text = MPIRUN.host_script(_commands()["node1"], None)
    assert f"for m in {' '.join(mpirun.MPIRUN_PATHS)}; do" in text
    assert 'exec "$mpirun" \\\n' in text and "exec mpirun" not in text


@pytest.mark.parametrize(("uid", "allowed"), [(0, ["1", "1"]), (1000, ["", ""])])
def test_root_gets_open_mpis_run_as_root_permission(tmp_path: Path, uid: int, allowed: list[str]) -> None:
    """mpirun(1) of Open MPI 4.1.4 (Debian 12's openmpi-bin), "Running as root": mpirun aborts as root unless
    --allow-run-as-root or both OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1."""
    record = tmp_path / "env"
    names = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
    _run_first_host(tmp_path, uid, "".join(f'echo "${{{n}:-}}" >> {record}\n' for n in names))
    assert record.read_text().splitlines() == allowed


def test_the_first_hosts_script_writes_the_hostfile_and_runs_mpirun(tmp_path: Path) -> None:
    record = tmp_path / "mpirun.args"
    job_dir = _run_first_host(tmp_path, 1000, f'for a; do printf "%s\\n" "$a"; done > {record}\n')
    assert (job_dir / "hostfile").read_text() == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
    args = (tmp_path / "mpirun.args").read_text().splitlines()
    assert args[:6] == ["--hostfile", f"{job_dir}/hostfile", "-np", "4", "--bind-to", "none"]
    assert args[-8:] == [
        PY,
        f"{job_dir}/mpirun_rank.py",
        "10.0.0.1",
        "29501",
        "sub/x.py",
        "--epochs",
        "2",
        "a b",
    ]
    assert args[args.index("plm_rsh_agent") + 1] == f"bash {job_dir}/mpirun_rsh_agent.sh"


def test_the_rsh_agent_tags_the_remote_daemon_with_the_job(tmp_path: Path) -> None:
    """Open MPI's rsh launcher runs the agent as `AGENT [plm_rsh_args] HOST ORTED-COMMAND...` (seen with Open
    MPI 4.1.4); the options go to ssh."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in(bin_dir, "ssh", tmp_path / "ssh.args")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUPROV_JOB_ID": JOB}
    agent = str(onhost.path("mpirun_rsh_agent.sh"))
    subprocess.run(
        [
            "bash",
            agent,
            "-i",
            "/h/k",
            "-o",
            "IdentitiesOnly=yes",
            "-x",
            "10.0.0.2",
            " orted",
            "--daemonize",
            "-mca",
            "ess",
            '"env"',
        ],
        check=True,
        env=env,
    )
    assert (tmp_path / "ssh.args").read_text().splitlines() == [
        "-o",
        "BatchMode=yes",
        "-x",
        "-i",
        "/h/k",
        "-o",
        "IdentitiesOnly=yes",
        "-x",
        "10.0.0.2",
        f'GPUPROV_JOB_ID={JOB}; export GPUPROV_JOB_ID; : >"$HOME"/.gpuprov/jobs/{JOB}/orted.started;',
        " orted",
        "--daemonize",
        "-mca",
        "ess",
        '"env"',
    ]
    bad_env = {**env, "GPUPROV_JOB_ID": "x; rm -rf ~"}
    bad = subprocess.run(["bash", agent, "h", "orted"], env=bad_env, text=True, capture_output=True)
    assert bad.returncode == 2 and "not a gpuprov job id" in bad.stderr


def _shim(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(onhost.path("mpirun_rank.py")), *args], capture_output=True, text=True, env=env
    )


def test_the_shim_maps_open_mpis_variables_and_runs_the_script(tmp_path: Path) -> None:
    script = tmp_path / "show.py"
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    script.write_text(
        "import os, sys\n"
        f"print([os.environ[n] for n in {names!r}], sys.argv[1:], sys.path[0] == {str(tmp_path)!r})\n"
    )
    ompi = {
        "OMPI_COMM_WORLD_RANK": "3",
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "RANK": "stale",
    }
    proc = _shim({"PATH": os.environ["PATH"], **ompi}, "10.0.0.1", "29501", str(script), "--lr", "a b")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "['3', '4', '1', '2', '10.0.0.1', '29501'] ['--lr', 'a b'] True\n"


def test_each_rank_takes_its_own_hosts_gloo_interface(tmp_path: Path) -> None:
    """mpirun's -x gives every rank the first host's GLOO_SOCKET_IFNAME; the rank sets its own host's from
    GPUPROV_GLOO_IFNAMES, by its own address (198.51.100.7 and 203.0.113.7, TEST-NET-2 and -3, are none of
    this machine's)."""
    script = tmp_path / "show.py"
    script.write_text("import os\nprint(os.environ['GLOO_SOCKET_IFNAME'])\n")
    ompi = {f"OMPI_COMM_WORLD_{n}": "0" for n in ("RANK", "LOCAL_RANK")}
    ompi |= {f"OMPI_COMM_WORLD_{n}": "1" for n in ("SIZE", "LOCAL_SIZE")}
    env = {**ompi, "GLOO_SOCKET_IFNAME": "eth0", "GPUPROV_GLOO_IFNAMES": "198.51.100.7=eth0,127.0.0.1=ens5"}
    proc = _shim(env, "198.51.100.7", "29501", str(script))
    assert (proc.returncode, proc.stdout) == (0, "ens5\n"), proc.stderr
    # none of the addresses is this host's: the exported value stays
    env["GPUPROV_GLOO_IFNAMES"] = "198.51.100.7=eth0,203.0.113.7=ens5"
    assert _shim(env, "198.51.100.7", "29501", str(script)).stdout == "eth0\n"


def test_hosts_that_name_their_interfaces_differently_each_get_their_own() -> None:
    checks = []
    for name, ifname in (("node1", "eth0"), ("node2", "ens5")):
        host = hosts.Host(name, f"10.0.0.{name[-1]}", 22, "u", None, Path("/k"))
        found = route(source=host.address, ifname=ifname, interfaces=["lo", ifname])
        checks.append(preflight.HostCheck(host, python=PY, gpus=0, nproc=1, route=found))
    opts = options.LaunchOptions(script=Path("/tmp/x.py"), launcher="mpirun")
    commands = plan.build_commands(JOB, opts, checks, "10.0.0.1", 29501, "x.py", MPIRUN)
    assert commands["node1"].env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert commands["node1"].env["GPUPROV_GLOO_IFNAMES"] == "10.0.0.1=eth0,10.0.0.2=ens5"
    assert "-x GPUPROV_GLOO_IFNAMES" in MPIRUN.host_script(commands["node1"], None)


def test_the_shim_exits_with_the_scripts_status(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text("raise SystemExit(3)\n")
    ompi = {f"OMPI_COMM_WORLD_{n}": "0" for n in ("RANK", "LOCAL_RANK")}
    ompi |= {f"OMPI_COMM_WORLD_{n}": "1" for n in ("SIZE", "LOCAL_SIZE")}
    assert _shim(ompi, "h", "1", str(script)).returncode == 3


def test_the_shim_outside_mpirun_says_so(tmp_path: Path) -> None:
    proc = _shim({"OMPI_COMM_WORLD_RANK": "0"}, "h", "1", str(tmp_path / "x.py"))
    assert proc.returncode == 2
    assert proc.stderr == (
        "mpirun_rank.py: OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE not "
        "set: this is started by Open MPI's mpirun (gpuprov launch --launcher mpirun), not by hand\n"
    )
    assert _shim({}, "h").returncode == 2  # no script given


def test_the_standby_finds_the_jobs_processes_outside_its_own_group() -> None:
    env = {**os.environ, "GPUPROV_JOB_ID": "job-a"}
    other = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    same_group = subprocess.Popen(["sleep", "30"], env=env)
    other_job = subprocess.Popen(
        ["sleep", "30"], env={**env, "GPUPROV_JOB_ID": "job-ab"}, start_new_session=True
    )
    try:
        time.sleep(0.1)
        found = mpirun_standby.job_processes("job-a", os.getpgrp())
        assert other.pid in found and same_group.pid not in found and other_job.pid not in found
    finally:
        for proc in (other, same_group, other_job):
            proc.kill()
            proc.wait()


def test_the_standby_without_a_daemon_gives_up(tmp_path: Path) -> None:
    assert mpirun_standby.wait_for_job(str(tmp_path), "job-x", timeout=0.3) == 1


def test_the_standby_ends_once_the_jobs_processes_are_gone(tmp_path: Path) -> None:
    (tmp_path / mpirun_standby.MARKER).write_text("")
    env = {**os.environ, "GPUPROV_JOB_ID": "job-y"}
    rank = subprocess.Popen(["sleep", "1"], env=env, start_new_session=True)
    started = time.monotonic()
    assert mpirun_standby.wait_for_job(str(tmp_path), "job-y", timeout=5) == 0
    assert time.monotonic() - started >= 0.9  # it waited for the rank
    rank.wait()


def test_open_mpi_tagged_lines_are_shown_under_their_ranks_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printer = stream.Printer(
        ["node1", "node2"], {"node1": tmp_path / "node1.log"}, {"0": "node1", "1": "node2"}
    )
    match = stream._RANK_RE.match("[1,1]<stdout>:rank 1/2 started")
    assert match is not None and match.group(2) == "1" and match.group(3) == "rank 1/2 started"
    printer.line("node1", "[1,1]<stderr>:boom")
    printer.line("node1", "[1,1]<stdout>:rank 1/2 on node2: started[1,1]<stdout>:")
    printer.close()
    # the log keeps what arrived
    assert (tmp_path / "node1.log").read_text().splitlines()[0] == "[1,1]<stderr>:boom"
    shown = capsys.readouterr().out.splitlines()
    assert [line.split() for line in shown] == [
        ["node2/1", "|", "boom"],
        ["node2/1", "|", "rank", "1/2", "on", "node2:", "started"],
    ]


def test_the_sbatch_script_is_valid_bash_with_both_paths(tmp_path: Path) -> None:
    opts = options.LaunchOptions(
        script=Path("train.py"), nodes=2, launcher="mpirun", env={"FOO": "1"}, nproc=options.Nproc("count", 8)
    )
    text = MPIRUN.sbatch_script(sbatch.job(opts, ["--launcher", "mpirun"], 2, "/w", "train.py", "job.sbatch"))
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    assert "srun --mpi=pmix --kill-on-bad-exit=1 --label" in text
    assert (
        '"$mpirun" -np $((SLURM_NNODES * GPUPROV_NPROC)) --map-by ppr:"$GPUPROV_NPROC":node --bind-to none'
        in text
    )
    assert "export RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE" in text
    assert "export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID" in text
    assert "    -x FOO \\\n" in text
    # Slurm's tasks are mpirun's slots: the allocation has the ranks the script starts on each node.
    assert "#SBATCH --ntasks-per-node=8\n" in text and "export GPUPROV_NPROC=8\n" in text
    assert f"for m in {' '.join(mpirun.MPIRUN_PATHS)}; do" in text and '"$mpirun" -np' in text
    assert 'case "$(srun --mpi=list 2>&1)" in *pmix*)' in text and "grep -qw pmix" not in text


@pytest.mark.parametrize("nproc", ["auto", "gpu"])
def test_the_sbatch_script_needs_a_number_of_ranks_per_node(nproc: str) -> None:
    opts = options.LaunchOptions(
        script=Path("train.py"), nodes=2, launcher="mpirun", nproc=options.Nproc(nproc)
    )
    with pytest.raises(BadInput) as caught:
        MPIRUN.sbatch_script(sbatch.job(opts, [], 2, "/w", "train.py", "job.sbatch"))
    assert str(caught.value) == (
        f"--launcher mpirun under Slurm needs --nproc-per-node as a number, not '{nproc}': the sbatch script "
        "asks Slurm for that many tasks per node (e.g. --nproc-per-node 8 on 8-GPU nodes)"
    )
