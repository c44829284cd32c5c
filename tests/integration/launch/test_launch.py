"""`gpuprov launch` end to end on a real 2-node sandbox: real SSH, real torchrun with gloo across
containers, real process trees checked on the nodes. One sandbox for the whole module."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, Sandbox
from tests.integration.job_scripts import write_sleeper
from tests.integration.launch.conftest import (
    REPO,
    container,
    docker_exec,
    gp,
    job_processes,
    launch_env,
)

pytestmark = pytest.mark.integration

EXAMPLE = str(REPO / "examples" / "train_ddp.py")


@pytest.fixture(scope="module")
def sleeper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sleeper(tmp_path_factory.mktemp("scripts"))


def _job_id(output: str) -> str:
    for word in output.split():
        if word.count("-") == 2 and word[:8].isdigit() and len(word) == 20:
            return word
    raise AssertionError(f"no job id in:\n{output}")


def _remote_job_dirs(sandbox: Sandbox) -> dict[str, set[str]]:
    return {
        node: set(docker_exec(container(sandbox, node), "ls", "/home/gpuprov/.gpuprov/jobs").stdout.split())
        for node in ("node1", "node2")
    }


def _assert_no_job_process(sandbox: Sandbox, job_id: str) -> None:
    for node in ("node1", "node2"):
        left = job_processes(container(sandbox, node), job_id)
        assert left == [], f"{node} still runs processes of job {job_id}: {left}"


def test_training_across_two_nodes_and_resume(launch_sandbox: Sandbox, tmp_path: Path) -> None:
    ckpt = f"/tmp/ckpt-{tmp_path.name}.pt"
    first = gp(
        launch_sandbox, "-v", "launch", "--nodes", "2", EXAMPLE, "--", "--epochs", "2", "--checkpoint", ckpt
    )
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert "all-reduce agreement OK: world 2, sum of ranks 1 (expected 1)" in out
    assert "node1/0" in out and "node2/1" in out  # host/rank prefixes
    assert "rank 1/2 on node2: started" in out
    job_id = _job_id(first.stderr)
    local = Path(launch_env(launch_sandbox)["GPUPROV_STATE_DIR"]) / "jobs" / job_id
    assert sorted(p.name for p in local.glob("*.log")) == ["node1.log", "node2.log"]
    assert "[rank1]:rank 1/2 on node2: started" in (local / "node2.log").read_text()
    _assert_no_job_process(launch_sandbox, job_id)

    # Resume from rank 0's checkpoint; the unchanged script is not sent again.
    second = gp(
        launch_sandbox, "-v", "launch", "--nodes", "2", EXAMPLE, "--", "--epochs", "1", "--checkpoint", ckpt
    )
    assert second.returncode == 0, second.stderr
    assert f"resumed from {ckpt} at epoch 2" in second.stdout
    assert "epoch 2: mean loss" in second.stdout
    assert "sent 0 file(s), 2 unchanged and skipped" in second.stderr

    jobs = gp(launch_sandbox, "jobs")
    assert jobs.returncode == 0
    line = next(line for line in jobs.stdout.splitlines() if line.startswith(job_id))
    assert "node1,node2" in line and "succeeded" in line and "node1=0, node2=0" in line


def test_rank_crash_tears_down_every_host(launch_sandbox: Sandbox, sleeper: Path) -> None:
    began = time.monotonic()
    proc = gp(launch_sandbox, "launch", "--nodes", "2", "--env", "CRASH=1", str(sleeper))
    elapsed = time.monotonic() - began
    assert proc.returncode == 1, proc.stderr
    job_id = _job_id(proc.stderr)
    assert f"error: job {job_id} failed: node2 exited with 1; the other hosts were stopped" in proc.stderr
    assert "stopped by gpuprov" in proc.stderr  # node1 in the table
    assert "rank 1: rank 1 fails now" in proc.stderr  # the table shows the ranks' last lines
    _assert_no_job_process(launch_sandbox, job_id)
    assert elapsed < 60


def test_a_host_whose_sshd_allows_one_session_per_connection(launch_sandbox: Sandbox, sleeper: Path) -> None:
    """sshd's MaxSessions 1 on node1, the master (a hardened site; the default is 10): preflight's own
    session opens first, the push begun beside it is refused there (or gets the slot once preflight's
    session is gone: ssh.open_channel asks again for a moment), and the push starts again after preflight
    where it did not serve. A job runs, and one whose other rank fails is torn down there too."""
    node1 = container(launch_sandbox, "node1")
    conf = "/etc/ssh/sshd_config.d/00-gpuprov-test-max-sessions.conf"
    limit = f"echo 'MaxSessions 1' > {conf} && systemctl reload ssh && sleep 1"
    assert docker_exec(node1, "sh", "-c", limit).returncode == 0
    try:
        ok = gp(launch_sandbox, "launch", "--nodes", "2", EXAMPLE, "--", "--epochs", "1")
        assert ok.returncode == 0, ok.stderr
        crash = gp(launch_sandbox, "launch", "--nodes", "2", "--env", "CRASH=1", str(sleeper))
        assert crash.returncode == 1, crash.stderr
        assert "node2 exited with 1; the other hosts were stopped" in crash.stderr
        _assert_no_job_process(launch_sandbox, _job_id(crash.stderr))
    finally:
        docker_exec(node1, "sh", "-c", f"rm -f {conf} && systemctl reload ssh && sleep 1")


def _launch_until_both_ranks_are_up(sandbox: Sandbox, sleeper: Path) -> subprocess.Popen[str]:
    """An attached 2-node launch of the sleeper, returned once each node's rank has printed that it is up."""
    proc = subprocess.Popen(
        [str(BIN / "gpuprov"), "launch", "--nodes", "2", str(sleeper)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=launch_env(sandbox),
    )  # fmt: skip
    assert proc.stdout is not None
    seen = set()
    deadline = time.monotonic() + 120
    while len(seen) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "| rank " in line and " up" in line:
            seen.add(line.split("/")[0])
    assert seen == {"node1", "node2"}
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_tears_down_every_host(launch_sandbox: Sandbox, sleeper: Path, sig: signal.Signals) -> None:
    proc = _launch_until_both_ranks_are_up(launch_sandbox, sleeper)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    job_id = _job_id(err)
    assert "interrupted" in err
    _assert_no_job_process(launch_sandbox, job_id)


def test_lost_ssh_connection_counts_as_that_node_failing(launch_sandbox: Sandbox, sleeper: Path) -> None:
    proc = _launch_until_both_ranks_are_up(launch_sandbox, sleeper)
    # Cut node2's SSH connection: kill the sshd process that serves gpuprov's session there (the listener
    # stays, so a new connection can still get in, as after a network blip).
    node2 = container(launch_sandbox, "node2")
    cut = docker_exec(node2, "pkill", "-KILL", "-u", "gpuprov", "-f", "^sshd: gpuprov")
    assert cut.returncode == 0, cut.stderr
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 1, err
    job_id = _job_id(err)
    assert f"error: job {job_id} failed: node2 " in err, err
    assert "stopped by gpuprov" in err  # node1, torn down because node2 was lost
    _assert_no_job_process(launch_sandbox, job_id)


def test_detach_logs_stop_and_a_second_job_survives_teardown(launch_sandbox: Sandbox, sleeper: Path) -> None:
    detached = gp(launch_sandbox, "launch", "--nodes", "2", "--detach", str(sleeper))
    assert detached.returncode == 0, detached.stderr
    job_a = detached.stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            logs = gp(launch_sandbox, "logs", job_a)
            if "node2/1" in logs.stdout and "node1/0" in logs.stdout:
                break
            time.sleep(0.5)
        assert "rank 0 up" in logs.stdout and "rank 1 up" in logs.stdout, logs.stdout + logs.stderr
        listed = gp(launch_sandbox, "jobs").stdout
        assert any(line.startswith(job_a) and "running" in line for line in listed.splitlines())

        # Job B on the same hosts crashes and is torn down; job A keeps running.
        crashed = gp(launch_sandbox, "launch", "--nodes", "2", "--env", "CRASH=1", str(sleeper))
        assert crashed.returncode == 1
        _assert_no_job_process(launch_sandbox, _job_id(crashed.stderr))
        for node in ("node1", "node2"):
            assert job_processes(container(launch_sandbox, node), job_a), f"job A died on {node}"
        # `logs -f` follows until the job ends (here: until `stop` below ends it).
        follower = subprocess.Popen(
            [str(BIN / "gpuprov"), "logs", job_a, "-f"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=launch_env(launch_sandbox),
        )  # fmt: skip
    finally:
        stopped = gp(launch_sandbox, "stop", job_a)
    followed, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0 and "node1/0" in followed and "rank 1 up" in followed
    assert stopped.returncode == 0, stopped.stderr
    assert f"Job {job_a} stopped on 2 host(s)" in stopped.stderr
    _assert_no_job_process(launch_sandbox, job_a)
    listed = gp(launch_sandbox, "jobs").stdout
    assert any(line.startswith(job_a) and "stopped" in line for line in listed.splitlines())


def test_stock_etc_hosts_c10d_training_binds_gloo_to_the_interface_toward_the_peers(
    launch_sandbox: Sandbox,
) -> None:
    """Issue 30, item 1: the nodes' hostnames resolve to 127.0.1.1 as on a stock Debian/Ubuntu install
    (gpuprov.sandbox.etc_hosts); gloo gets the interface toward the peers and c10d the address on it."""
    for node in ("node1", "node2"):
        resolved = docker_exec(container(launch_sandbox, node), "getent", "hosts", node).stdout.split()
        assert resolved[:2] == ["127.0.1.1", node], resolved
    dry = gp(launch_sandbox, "launch", "--nodes", "2", "--rdzv", "c10d", "--dry-run", EXAMPLE)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("export GLOO_SOCKET_IFNAME=eth0") == 2, dry.stdout
    for line in Path(launch_sandbox.inventory).read_text().splitlines():
        if line.startswith(("node1 ", "node2 ")):  # each node's address is its own --local-addr
            address = line.split("ansible_host=")[1].split()[0]
            assert f"--local-addr {address} " in dry.stdout, dry.stdout
    run = gp(launch_sandbox, "launch", "--nodes", "2", "--rdzv", "c10d", EXAMPLE, "--", "--epochs", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "all-reduce agreement OK: world 2, sum of ranks 1 (expected 1)" in run.stdout


def test_dry_run_prints_commands_and_starts_nothing(launch_sandbox: Sandbox) -> None:
    before = _remote_job_dirs(launch_sandbox)
    proc = gp(
        launch_sandbox,
        "launch",
        "--nodes",
        "2",
        "--dry-run",
        "--env",
        "FOO=bar",
        EXAMPLE,
        "--",
        "--epochs",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "# ===== node1 (gpuprov@" in out and "# ===== node2 (gpuprov@" in out
    assert "--node-rank 0" in out and "--node-rank 1" in out
    assert "export FOO=bar" in out and "export GPUPROV_JOB_ID=" in out
    assert 'exec /opt/gpuprov/envs/train/bin/python "$HOME"/.gpuprov/jobs/' in out
    assert "/run_torchrun.py \\\n  --nnodes 2" in out
    assert "train_ddp.py --epochs 1" in out
    assert _remote_job_dirs(launch_sandbox) == before


# ----- bad input: one line each, non-zero exit, nothing started on any host -------------------------------


def _assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert proc.returncode == code, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    assert text in errors[0], errors[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--nodes", "2", "missing_script.py"], "script missing_script.py does not exist"),
        (["--nodes", "3", EXAMPLE], "--nodes 3 is more than the 2 host(s)"),
        (["--hosts", "node1,node9", EXAMPLE], "--hosts: node9 not in"),
    ],
    ids=["missing-script", "too-many-nodes", "unknown-host"],
)
def test_bad_input(launch_sandbox: Sandbox, args: list[str], text: str) -> None:
    before = _remote_job_dirs(launch_sandbox)
    _assert_one_line_error(gp(launch_sandbox, "launch", *args), 2, text)
    assert _remote_job_dirs(launch_sandbox) == before


_HOLD_PORT = (
    "import os, socket, time; s = socket.socket(); s.bind(('0.0.0.0', 29777)); s.listen(); "
    "print(os.getpid(), flush=True); time.sleep(120)"
)


def test_master_port_in_use(launch_sandbox: Sandbox) -> None:
    node1 = container(launch_sandbox, "node1")
    holder = subprocess.Popen(
        ["docker", "exec", "-u", "gpuprov", node1, "python3", "-c", _HOLD_PORT],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    pid = holder.stdout.readline().strip()
    try:
        assert pid.isdigit()
        before = _remote_job_dirs(launch_sandbox)
        proc = gp(launch_sandbox, "launch", "--nodes", "2", "--master-port", "29777", EXAMPLE)
        _assert_one_line_error(proc, 2, "master port 29777 is in use on node1")
        assert _remote_job_dirs(launch_sandbox) == before
    finally:
        docker_exec(node1, "kill", pid)
        holder.wait(timeout=30)


def test_host_without_env(launch_sandbox: Sandbox) -> None:
    node2 = container(launch_sandbox, "node2")
    hide = "mv /opt/gpuprov/envs/train /opt/gpuprov/envs/train.off && mv {f} {f}.off"
    fact = "/etc/ansible/facts.d/gpuprov_python_env.fact"
    assert docker_exec(node2, "sh", "-c", hide.format(f=fact)).returncode == 0
    try:
        before = _remote_job_dirs(launch_sandbox)
        proc = gp(launch_sandbox, "launch", "--nodes", "2", EXAMPLE)
        _assert_one_line_error(proc, 7, "node2: no Python env at /opt/gpuprov/envs/train/bin/python")
        assert "run `gpuprov bootstrap` on it first" in proc.stderr
        assert _remote_job_dirs(launch_sandbox) == before
    finally:
        restore = "mv /opt/gpuprov/envs/train.off /opt/gpuprov/envs/train && mv {f}.off {f}"
        docker_exec(node2, "sh", "-c", restore.format(f=fact))


def test_host_whose_torch_cannot_be_imported(launch_sandbox: Sandbox) -> None:
    # torch's files are all there (the quick look passes); only the real `import torch` fails, as it would
    # for a rank: a .pth file makes its compiled core unimportable in that env on node2.
    node2 = container(launch_sandbox, "node2")
    pth = "$(echo /opt/gpuprov/envs/train/lib/python3*/site-packages)/gpuprov-test-break-torch.pth"
    breaker = "import sys; sys.modules['torch._C'] = None"
    assert docker_exec(node2, "sh", "-c", f'echo "{breaker}" > "{pth}"').returncode == 0
    try:
        before = _remote_job_dirs(launch_sandbox)
        proc = gp(launch_sandbox, "launch", "--nodes", "2", EXAMPLE)
        _assert_one_line_error(proc, 7, "node2: the env /opt/gpuprov/envs/train/bin/python cannot import")
        assert _remote_job_dirs(launch_sandbox) == before
    finally:
        docker_exec(node2, "sh", "-c", f'rm -f "{pth}"')
