"""`gpuprov launch --scheduler slurm`: the same job, submitted to the Slurm that the slurm role runs.

The job's code is pushed, as for SSH launching, to ~/.gpuprov/jobs/JOB/work on the controller (the one
host of the inventory group slurm_controller) and on every node of Slurm's default partition that the
inventory names; the sbatch script (templates/sbatch.sh.j2: srun + torchrun, c10d rendezvous on the
first allocated node) goes beside it as job.sbatch, and `sbatch --parsable` runs on the controller in
that directory. Slurm's batch host (the allocation's first node) writes the job's output to slurm.out in
the same directory on itself; the client reads it from there over SSH (`srun --label` marks each line
with the node's task number, which the script's first line maps to node names).
"""

from __future__ import annotations

import contextlib
import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuprov import console, host_options, hosts, interrupts, ssh
from gpuprov.errors import BadInput, ExitCode, GpuprovError
from gpuprov.launch import environments, jobs, launchers, push, sbatch, slurm_gpus, slurm_nodes, stream
from gpuprov.launch.environments.container_image import HOST_PYTHON, ContainerImage
from gpuprov.launch.options import DEFAULT_MASTER_PORT, LaunchOptions
from gpuprov.launch.schedulers import slurm_accounting

CONTROLLER_GROUP = "slurm_controller"
SBATCH_FILE = "job.sbatch"
OUTPUT_FILE = "slurm.out"
POLL_S = 1.0
CANCEL_WAIT_S = 60.0
FIND_INTERVAL_S = 5.0  # how often a batch host that the record does not name is looked for (its output file)
REASON_WAIT_S = 5.0  # a job just submitted is PENDING with Reason=None until the scheduler has looked at it
# Slurm job states (squeue(1), "JOB STATE CODES") after which nothing of the job runs any more.
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
     "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
)  # fmt: skip
_FIELD_RE = re.compile(r"(\w+)=(\S*)")
_LABEL_RE = re.compile(r"^\s*(\d+): ?(.*)$")
_NODES_LINE = "gpuprov-nodes:"


class JobExited(GpuprovError):
    """The Slurm job ended with a non-zero exit code; gpuprov exits with the same code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code  # type: ignore[assignment]  # the job's own code, not one of gpuprov's


# ----- the cluster ---------------------------------------------------------------------------------------


def controller_name(inventory: Path) -> str:
    """The one host of [slurm_controller] (the inventory was already checked by hosts.load)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    manager = InventoryManager(loader=DataLoader(), sources=[str(inventory.resolve())])
    group = manager.groups.get(CONTROLLER_GROUP)
    members = [h.name for h in group.get_hosts()] if group is not None else []
    if len(members) != 1:
        raise BadInput(
            f"{inventory}: --scheduler slurm needs exactly one host in group [{CONTROLLER_GROUP}] "
            f"(it has {', '.join(members) or 'none'}); add the host that runs slurmctld "
            "(`gpuprov sandbox up --slurm` writes one) or launch without --scheduler slurm"
        )
    return str(members[0])


def default_partition(client: ssh.Client, controller: str) -> slurm_nodes.Partition:
    """Check that slurmctld answers; return the default partition and its nodes (launch.slurm_nodes)."""
    ping = ssh.run(client, "scontrol ping")
    if ping.rc != 0 or "is UP" not in ping.stdout:
        raise BadInput(
            f"Slurm is not running on {controller} (scontrol ping: {ping.last_line}); start slurmctld there "
            "(`gpuprov bootstrap` applies the slurm role) or launch without --scheduler slurm"
        )
    listed = ssh.run(client, f"sinfo --noheader --Node --format {shlex.quote(slurm_nodes.SINFO_FORMAT)}")
    part = slurm_nodes.default_partition(listed.stdout) if listed.rc == 0 else None
    if part is None:
        raise BadInput(f"Slurm on {controller} has no default partition (sinfo: {listed.last_line})")
    return part


def _python(opts: LaunchOptions) -> str:
    """The python that receives the job's files on the hosts (Slurm starts the job: no preflight asked
    them): with --image the host's python3 (receive.py needs only the standard library; the nodes of a
    pyxis cluster need no gpuprov env), else the environment's."""
    return HOST_PYTHON if opts.image else environments.by_name(environments.DEFAULT).default_python


def _image_python(opts: LaunchOptions, controller: hosts.Host) -> str:
    """With --image, the inventory's gpuprov_image_python (as SSH launching uses it), else the default."""
    return ContainerImage(opts.image).image_of(controller) if opts.image else ""


# ----- submitting ----------------------------------------------------------------------------------------


def sbatch_text(
    opts: LaunchOptions, nnodes: int, argv: list[str], script: str, gpus_per_node: int = 0, python: str = ""
) -> str:
    """The sbatch script for this job; srun runs torchrun on `script` in work/ beside it."""
    job = sbatch.job(
        opts, argv, nnodes, "work", script, SBATCH_FILE, workdir_relative=True, gpus_per_node=gpus_per_node,
        python=python,
    )  # fmt: skip
    return launchers.by_name(opts.launcher).sbatch_script(job)


def launch(opts: LaunchOptions, argv: list[str]) -> str:
    """Submit the job; unless detached, follow it to its end. Returns gpuprov's job id."""
    if opts.hosts:
        raise BadInput("--hosts picks hosts for SSH launching; with --scheduler slurm give --nodes N")
    if opts.dry_run:
        raise BadInput("--dry-run is for SSH launching; --emit-sbatch FILE shows what Slurm would run")
    jobs.check_room()  # before the controller is contacted
    inventory = hosts.load(host_options.inventory_path(opts.inventory))
    controller_host = _inventory_host(inventory, controller_name(inventory.path), "the Slurm controller")
    with _connected(controller_host) as ctl:
        part = default_partition(ctl, controller_host.name)
        nnodes = opts.nodes or len(part.nodes)
        if nnodes > len(part.nodes):
            raise BadInput(
                f"--nodes {nnodes}: Slurm's partition {part.name} has {len(part.nodes)} node(s) "
                f"({', '.join(part.names)}); ask for at most {len(part.nodes)}"
            )
        slurm_nodes.check_available(part, nnodes, controller_host.name)
        # Only the nodes that can take the job get its files, and Slurm is told to leave out the others
        # (an SSH push to a down or powered-off node would fail the whole launch).
        usable = [n for n in part.nodes if not n.unavailable]
        excluded = [n.name for n in part.nodes if n.unavailable]
        node_hosts = {n.name: slurm_nodes.inventory_host(inventory, n, part.name) for n in usable}
        targets = [controller_host] + [h for h in node_hosts.values() if h.name != controller_host.name]
        gpus = slurm_gpus.per_node(ctl, part.name, controller_host.name, [n.name for n in usable])
        payload = push.collect(opts.script, opts.workdir, opts.include_large, opts.max_file_mb)
        job = _record(opts, targets, part, payload)
        text = sbatch_text(opts, nnodes, argv, payload.script_rel, gpus, _image_python(opts, controller_host))
        console.step(f"Pushing {len(payload.files)} file(s) to ~/{job.remote_dir} on {len(targets)} host(s)")
        names = {node: host.name for node, host in node_hosts.items() if node != host.name}
        slurm_id = _push_and_submit(targets, ctl, job, payload, text, nnodes, names, excluded)
        job.slurm_job_id = slurm_id
        job.mark(jobs.RUNNING)  # saves the record with Slurm's id
        console.success(f"Job {job.id} submitted to Slurm as job {slurm_id} on {controller_host.name}")
        waiting = slurm_nodes.busy_note(part, nnodes)
        if waiting:
            console.info(f"Job {job.id} may wait in Slurm's queue: {waiting}")
        if opts.detach:
            say_if_queued(ctl, job)
            console.result(job.id)
            console.info(f"  gpuprov logs {job.id} -f    gpuprov jobs    gpuprov stop {job.id}")
            return job.id
        follow_to_end(job, ctl)
        return job.id


def _record(
    opts: LaunchOptions, targets: list[hosts.Host], part: slurm_nodes.Partition, payload: push.Payload
) -> jobs.Job:
    """The job's record, saved as starting: the controller first, then the partition's nodes."""
    python = _python(opts)
    job = jobs.Job(
        id=jobs.new_id(),
        script=payload.script_rel,
        args=list(opts.script_args),
        hosts=[jobs.JobHost.of(h, python=python, node_rank=rank, nproc=1) for rank, h in enumerate(targets)],
        master=f"{part.name}:{opts.master_port or DEFAULT_MASTER_PORT}",
        detach=opts.detach,
        grace_s=opts.grace_s,
        state=jobs.STARTING,
        slurm_controller=targets[0].name,
    )
    job.save()
    return job


def _push_and_submit(
    targets: list[hosts.Host],
    ctl: ssh.Client,
    job: jobs.Job,
    payload: push.Payload,
    text: str,
    nnodes: int,
    names: dict[str, str],
    excluded: list[str],
) -> str:
    """Push the job's files to every host, then sbatch on the controller (leaving out the excluded nodes,
    which got no files); Slurm's job id.

    names: the inventory name of each Slurm node named otherwise, for the script's node line (sbatch
    passes the submitting shell's environment to the job: sbatch(1) --export, ALL by default).
    The job is recorded as failed when either fails."""
    controller = targets[0].name
    renamed = " ".join(f"{node}={name}" for node, name in names.items())
    try:
        _push_all(targets, ctl, controller, job, payload, text, job.hosts[0].python)
        exclude = f"--exclude={shlex.quote(','.join(excluded))} " if excluded else ""
        submitted = ssh.run(
            ctl,
            f"cd {shlex.quote(job.remote_dir)} && GPUPROV_NODE_NAMES={shlex.quote(renamed)} "
            f"sbatch --parsable --nodes={nnodes} {exclude}"
            f"--job-name=gpuprov-{job.id} --output={OUTPUT_FILE} {SBATCH_FILE}",
        )
    except BaseException:
        job.finish("failed", {})
        raise
    slurm_id = submitted.stdout.strip().split(";")[0]
    if submitted.rc != 0 or not slurm_id.isdigit():
        job.finish("failed", {})
        raise GpuprovError(f"sbatch on {controller} refused job {job.id}: {submitted.last_line}")
    return slurm_id


def _inventory_host(inventory: hosts.Inventory, name: str, what: str) -> hosts.Host:
    try:
        return inventory.host(name)
    except KeyError:
        raise BadInput(
            f"{inventory.path}: {what} is {name}, which is not in group [{inventory.group}]; add it "
            "(gpuprov pushes the job's code to it)"
        ) from None


@contextlib.contextmanager
def _connected(host: hosts.Host) -> Iterator[ssh.Client]:
    client = ssh.connect(host)
    try:
        yield client
    finally:
        client.close()


def _push_all(
    targets: list[hosts.Host],
    ctl: ssh.Client,
    controller: str,
    job: jobs.Job,
    payload: push.Payload,
    text: str,
    python: str,
) -> None:
    def one(host: hosts.Host) -> None:
        extra = {SBATCH_FILE: text.encode()}
        if host.name == controller:
            _deliver(host.name, ctl, job.remote_dir, payload, extra, python)
            return
        with _connected(host) as client:
            _deliver(host.name, client, job.remote_dir, payload, extra, python)

    ssh.values(ssh.fan_out(targets, one))


def _deliver(
    host: str, client: ssh.Client, job_dir: str, payload: push.Payload, extra: dict[str, bytes], python: str
) -> None:
    """Copy the job's files to the host; Slurm starts the job, so the push's channel starts nothing."""
    push.push(host, client, python, job_dir, payload, extra).cancel()


# ----- following ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmState:
    state: str  # Slurm's JobState, or "UNKNOWN" once Slurm has forgotten the job
    reason: str
    exit_code: int | None
    batch_host: str | None

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES or self.state == "UNKNOWN"


def parse_job(text: str) -> SlurmState:
    """`scontrol show job --oneliner ID` -> its state, reason, exit code and batch host."""
    fields = dict(_FIELD_RE.findall(text))
    code: int | None = None
    if ":" in fields.get("ExitCode", ""):
        status, signal = (int(part) for part in fields["ExitCode"].split(":", 1))
        code = 128 + signal if signal else status
    batch = fields.get("BatchHost") or None
    return SlurmState(fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""), code, batch)


def job_state(ctl: ssh.Client, slurm_id: str, submitted: float) -> SlurmState:
    """Slurm's state of the job; once slurmctld has forgotten it (MinJobAge), accounting's, else UNKNOWN with
    the reason as its Reason ("no accounting" where slurmdbd is not set up)."""
    shown = ssh.run(ctl, f"scontrol show job --oneliner {slurm_id}")
    if shown.rc == 0:
        return parse_job(shown.stdout)
    acct = ssh.run(ctl, slurm_accounting.command(slurm_id, submitted))
    end = slurm_accounting.parse(slurm_id, acct.rc, acct.stdout, acct.stderr)
    if isinstance(end, slurm_accounting.Ended):
        return parse_job(f"JobState={end.state} ExitCode={end.exit_code}")
    return SlurmState("UNKNOWN", end.why, None, None)


def queue_position(ctl: ssh.Client, slurm_id: str) -> int | None:
    """1 for the pending job Slurm will start next, by priority."""
    pending = ssh.run(ctl, "squeue --noheader --states=PENDING --sort=-p,i --format=%i")
    ids = pending.stdout.split()
    return ids.index(slurm_id) + 1 if slurm_id in ids else None


def say_if_queued(ctl: ssh.Client, job: jobs.Job) -> SlurmState:
    """For --detach: say so when the job waits in the queue (Slurm gives a reason within a few seconds)."""
    assert job.slurm_job_id is not None
    deadline = time.monotonic() + REASON_WAIT_S
    state = job_state(ctl, job.slurm_job_id, job.created)
    while state.state == "PENDING" and state.reason == "None" and time.monotonic() < deadline:
        time.sleep(POLL_S / 2)
        state = job_state(ctl, job.slurm_job_id, job.created)
    if state.state == "PENDING" and state.reason != "None":
        position = queue_position(ctl, job.slurm_job_id)
        console.info(
            f"Job {job.id} is queued (Slurm job {job.slurm_job_id}, position {position or '?'} in the queue, "
            f"reason: {state.reason})"
        )
    return state


class OutputReader:
    """Reads slurm.out on the batch host from where it last stopped, and prints its lines by node."""

    def __init__(self, job: jobs.Job, printer: stream.Printer) -> None:
        self.job, self.printer = job, printer
        self.offset = 0
        self.partial = ""
        self.nodes: list[str] = []
        self.client: ssh.Client | None = None
        self.host: str | None = None
        self.next_find = 0.0

    def attach(self, host: str) -> None:
        """Read from the batch host Slurm names; a Slurm node name that is no host name of the record (the
        inventory names it by FQDN or address: launch.slurm_nodes) is found by its output file."""
        if self.client is None:
            record = next((h for h in self.job.hosts if h.name == host), None)
            if record is not None:
                self.client, self.host = ssh.connect(record.to_host()), host
            elif time.monotonic() >= self.next_find:
                self.next_find = time.monotonic() + FIND_INTERVAL_S
                self.find()

    def find(self) -> bool:
        """For a job whose batch host Slurm no longer names: the host that has its output."""
        for record in self.job.hosts:
            with contextlib.suppress(GpuprovError):
                client = ssh.connect(record.to_host())
                if ssh.run(client, f"test -f {self._path()}").rc == 0:
                    self.client, self.host = client, record.name
                    return True
                client.close()
        return False

    def _path(self) -> str:
        return shlex.quote(f"{self.job.remote_dir}/{OUTPUT_FILE}")

    def read(self) -> None:
        if self.client is None:
            return
        got = ssh.run(self.client, f"tail -c +{self.offset + 1} {self._path()} 2>/dev/null")
        if got.rc != 0 or not got.stdout:
            return
        self.offset += len(got.stdout.encode())
        text = self.partial + got.stdout
        *lines, self.partial = text.split("\n")
        for line in lines:
            self._print(line)

    def flush(self) -> None:
        self.read()
        if self.partial:
            self._print(self.partial)
            self.partial = ""

    def _print(self, line: str) -> None:
        if line.startswith(_NODES_LINE):
            self.nodes = line.split()[1:]
            return
        match = _LABEL_RE.match(line)
        # A node the record does not name (a site whose SBATCH_EXPORT keeps GPUPROV_NODE_NAMES from the
        # script, so the node line has Slurm's names): its lines go with the batch host's.
        known = {h.name for h in self.job.hosts}
        if match and int(match.group(1)) < len(self.nodes) and self.nodes[int(match.group(1))] in known:
            self.printer.line(self.nodes[int(match.group(1))], match.group(2))
        elif match and int(match.group(1)) < len(self.nodes):
            self.printer.line(self.host or "slurm", f"{self.nodes[int(match.group(1))]}: {match.group(2)}")
        else:
            self.printer.line(self.host or "slurm", line)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _printer(job: jobs.Job, keep_logs: bool) -> stream.Printer:
    names = [h.name for h in job.hosts]
    return stream.Printer(names, {n: job.log_path(n) for n in names} if keep_logs else {})


def follow_to_end(job: jobs.Job, ctl: ssh.Client) -> None:
    """Print the job's output until it ends; record the end; exit with the job's code. Ctrl-C cancels it."""
    assert job.slurm_job_id is not None
    reader = OutputReader(job, _printer(job, keep_logs=True))
    try:
        state = watch(job, ctl, reader)
    except KeyboardInterrupt:
        with interrupts.shielded():
            console.warning(f"interrupted: cancelling Slurm job {job.slurm_job_id}")
            cancel(job, ctl)
            reader.flush()
            job.finish("interrupted", {})
        raise
    finally:
        reader.close()
    record_end(job, state, reader.host)


def watch(job: jobs.Job, ctl: ssh.Client, reader: OutputReader) -> SlurmState:
    assert job.slurm_job_id is not None
    said = ""
    while True:
        state = job_state(ctl, job.slurm_job_id, job.created)
        if state.state == "PENDING" and state.reason != "None":
            note = state.reason
            if note != said:
                said = note
                position = queue_position(ctl, job.slurm_job_id)
                console.info(
                    f"Job {job.id} is queued (Slurm job {job.slurm_job_id}, position {position or '?'}, "
                    f"reason: {state.reason})"
                )
        elif state.batch_host and reader.client is None:
            reader.attach(state.batch_host)
        elif reader.client is None and state.final:
            reader.find()
        reader.read()
        if state.final:
            reader.flush()
            return state
        time.sleep(POLL_S)


def record_end(job: jobs.Job, state: SlurmState, host: str | None) -> None:
    codes: dict[str, int | None] = {host or job.slurm_controller or "slurm": state.exit_code}
    if state.state == "COMPLETED" and state.exit_code == 0:
        job.finish("succeeded", codes)
        console.success(f"Job {job.id} (Slurm job {job.slurm_job_id}) completed (logs: {job.local_dir})")
        return
    job.finish("stopped" if state.state == "CANCELLED" else "failed", codes)
    code = state.exit_code or int(ExitCode.FAILURE)
    raise JobExited(
        f"job {job.id} (Slurm job {job.slurm_job_id}) ended {state.state} with exit code {code}; "
        f"Slurm ended the whole allocation (logs: {job.local_dir})",
        code,
    )


def cancel(job: jobs.Job, ctl: ssh.Client) -> SlurmState:
    """scancel, then wait until Slurm says the job has ended everywhere."""
    assert job.slurm_job_id is not None
    done = ssh.run(ctl, f"scancel {job.slurm_job_id}")
    if done.rc != 0:
        raise GpuprovError(f"scancel {job.slurm_job_id} failed on {job.slurm_controller}: {done.last_line}")
    deadline = time.monotonic() + CANCEL_WAIT_S
    while True:
        state = job_state(ctl, job.slurm_job_id, job.created)
        if state.final or time.monotonic() > deadline:
            return state
        time.sleep(POLL_S)


# ----- jobs, logs, stop for Slurm jobs -----------------------------------------------------------------


def _controller(job: jobs.Job) -> hosts.Host:
    record = next((h for h in job.hosts if h.name == job.slurm_controller), None)
    if record is None:
        raise BadInput(f"the record of job {job.id} names no Slurm controller among its hosts")
    return record.to_host()


def refresh(job: jobs.Job) -> tuple[jobs.Job, str]:
    """Ask Slurm how the job stands (recording its end); return it with Slurm's state for `gpuprov jobs`."""
    if job.slurm_job_id is None:
        return job, job.state
    if job.state not in jobs.ACTIVE_STATES:
        return job, f"{job.state} (slurm {job.slurm_job_id})"
    with _connected(_controller(job)) as ctl:
        state = job_state(ctl, job.slurm_job_id, job.created)
    return job, _note_state(job, state)


def _note_state(job: jobs.Job, state: SlurmState) -> str:
    """Record a known end; the state `gpuprov jobs` shows."""
    if state.state == "UNKNOWN":
        # slurmctld has forgotten the job, so it ended at least MinJobAge ago; how, only accounting knew.
        return f"unknown, {state.reason} (slurm {job.slurm_job_id})"
    if state.final:
        codes: dict[str, int | None] = {state.batch_host or job.slurm_controller or "slurm": state.exit_code}
        ok = state.state == "COMPLETED" and state.exit_code == 0
        job.finish("succeeded" if ok else "stopped" if state.state == "CANCELLED" else "failed", codes)
    detail = f"{state.state.lower()}, {state.reason}" if state.state == "PENDING" else state.state.lower()
    return f"{job.state} (slurm {job.slurm_job_id}: {detail})"


def show_logs(job: jobs.Job, follow: bool) -> None:
    """The job's output, from the batch host's slurm.out; -f follows it until the job ends."""
    assert job.slurm_job_id is not None
    reader = OutputReader(job, _printer(job, keep_logs=False))
    try:
        if not follow or job.state not in jobs.ACTIVE_STATES:
            if not reader.find():
                raise GpuprovError(
                    f"job {job.id}: no host of it has its output (~/{job.remote_dir}/{OUTPUT_FILE}) yet",
                    ExitCode.HOSTS_UNREACHABLE,
                )
            reader.flush()
            return
        with _connected(_controller(job)) as ctl:
            state = watch(job, ctl, reader)
    finally:
        reader.close()
    refresh(job)
    console.detail(f"Slurm job {job.slurm_job_id} ended {state.state}")


def stop(job: jobs.Job) -> None:
    """scancel; recorded as stopped once Slurm says nothing of it runs."""
    assert job.slurm_job_id is not None
    if job.state in jobs.FINAL_STATES:
        console.info(f"Job {job.id} (Slurm job {job.slurm_job_id}) has already ended: {job.state}")
        return
    with _connected(_controller(job)) as ctl:
        shown = _note_state(job, job_state(ctl, job.slurm_job_id, job.created))
        if job.state in jobs.FINAL_STATES or shown.startswith("unknown"):
            # A job Slurm has forgotten is not recorded as stopped: it may well have completed.
            console.info(f"Job {job.id} (Slurm job {job.slurm_job_id}) has already ended: {shown}")
            return
        job.mark(jobs.STOPPING)
        state = cancel(job, ctl)
    if not state.final:
        raise GpuprovError(
            f"job {job.id}: Slurm job {job.slurm_job_id} is still {state.state} {CANCEL_WAIT_S:.0f} s after "
            f"scancel; run `gpuprov stop {job.id}` again"
        )
    job.finish("stopped", {state.batch_host or job.slurm_controller or "slurm": state.exit_code})
    console.success(f"Job {job.id} stopped (Slurm job {job.slurm_job_id} {state.state.lower()})")
