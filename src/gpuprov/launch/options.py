"""The options of `gpuprov launch`, checked before anything touches a host.

Every check here works on local input only (files, numbers, names); what needs the hosts is preflight's.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from gpuprov.errors import BadInput
from gpuprov.launch import host_options
from gpuprov.launch.jobs import MAX_GRACE_S, valid_grace

DEFAULT_MASTER_PORT = 29500
MASTER_PORT_SEARCH = 100  # without --master-port: the first free port in 29500..29599
DEFAULT_GRACE_S = 5.0
DEFAULT_MAX_FILE_MB = 10
RDZV_CHOICES = ("static", "c10d")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by gpuprov itself for every job; a user value would break teardown or log prefixes.
RESERVED_ENV = ("GPUPROV_JOB_ID", "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")


@dataclass(frozen=True)
class Nproc:
    """--nproc-per-node: a number, 'gpu' (one process per GPU; hosts need GPUs) or 'auto' (GPUs, else 1)."""

    mode: str  # "count", "gpu" or "auto"
    count: int = 0

    def __str__(self) -> str:
        return str(self.count) if self.mode == "count" else self.mode

    def resolve(self, gpus: int) -> int | None:
        """The process count on a host with `gpus` GPUs; None when 'gpu' was asked of a host without any."""
        if self.mode == "count":
            return self.count
        if gpus > 0:
            return gpus
        return 1 if self.mode == "auto" else None


SCHEDULERS = ("ssh", "slurm")


@dataclass(frozen=True)
class LaunchOptions:
    script: Path
    script_args: tuple[str, ...] = ()
    inventory: Path | None = None
    nodes: int | None = None
    hosts: tuple[str, ...] = ()
    nproc: Nproc = field(default_factory=lambda: Nproc("auto"))
    env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    include_large: bool = False
    max_file_mb: int = DEFAULT_MAX_FILE_MB
    master_port: int | None = None
    rdzv: str = "static"
    max_restarts: int = 0
    detach: bool = False
    dry_run: bool = False
    emit_sbatch: Path | None = None
    template: Path | None = None
    grace_s: float = DEFAULT_GRACE_S
    scheduler: str = "ssh"  # "slurm": submitted to Slurm (gpuprov.launch.slurm)


def parse_nproc(text: str) -> Nproc:
    value = text.strip().lower()
    if value in ("gpu", "auto"):
        return Nproc(value)
    if value.isdigit() and int(value) >= 1:
        return Nproc("count", int(value))
    raise BadInput(f"--nproc-per-node {text!r} is not valid: give a number >= 1, 'gpu' or 'auto'")


def parse_env_pair(text: str, where: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _ENV_NAME.match(name):
        raise BadInput(f"{where}: {text!r} is not NAME=VALUE (a name is letters, digits and '_')")
    if name in RESERVED_ENV:
        raise BadInput(f"{where}: {name} is set by gpuprov for every job and cannot be overridden")
    return name, value


def read_env_file(path: Path, label: str | None = None) -> dict[str, str]:
    """NAME=VALUE lines of UTF-8 text; blank lines and '#' comments skipped; values may be shell-quoted."""
    label = label or str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(f"--env-file {label} cannot be read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = data[: exc.start].count(b"\n") + 1
        byte = data[exc.start]
        raise BadInput(
            f"--env-file {label} line {where} is not UTF-8 text (byte 0x{byte:02x}); save it as UTF-8"
        ) from None
    if "\0" in text:
        where = text[: text.index("\0")].count("\n") + 1
        raise BadInput(
            f"--env-file {label} line {where} has a NUL byte, which no environment variable can hold"
        )
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, value = parse_env_pair(line, f"--env-file {label} line {number}")
        try:
            words = shlex.split(value) if value.strip() else [""]
        except ValueError as exc:
            raise BadInput(f"--env-file {label} line {number}: {exc}") from None
        env[name] = " ".join(words)
    return env


def build(
    *,
    script: str,
    script_args: tuple[str, ...] = (),
    inventory: str | None = None,
    nodes: int | None = None,
    hosts: str | None = None,
    nproc: str = "auto",
    env: tuple[str, ...] = (),
    env_file: str | None = None,
    workdir: str | None = None,
    include_large: bool = False,
    max_file_mb: int = DEFAULT_MAX_FILE_MB,
    master_port: int | None = None,
    rdzv: str = "static",
    max_restarts: int = 0,
    detach: bool = False,
    dry_run: bool = False,
    emit_sbatch: str | None = None,
    template: str | None = None,
    grace_s: float | str = DEFAULT_GRACE_S,
    scheduler: str = "ssh",
) -> LaunchOptions:
    """Check every option that needs no host; raise BadInput with one line for the first wrong one."""
    nodes, host_names = host_options.check(nodes, hosts)
    if master_port is not None and not 1 <= master_port <= 65535:
        raise BadInput(f"--master-port {master_port} is not a TCP port (1-65535)")
    if rdzv not in RDZV_CHOICES:
        raise BadInput(f"--rdzv {rdzv!r} is not valid: choose {' or '.join(RDZV_CHOICES)}")
    if max_restarts < 0:
        raise BadInput(f"--max-restarts {max_restarts} is not valid: give 0 or more")
    grace = parse_grace(grace_s)
    if max_file_mb < 1:
        raise BadInput(f"--max-file-mb {max_file_mb} is not valid: give 1 or more")
    if detach and dry_run:
        raise BadInput("--detach and --dry-run exclude each other")
    if scheduler not in SCHEDULERS:
        raise BadInput(f"--scheduler {scheduler!r} is not valid: choose {' or '.join(SCHEDULERS)}")

    work = None
    if workdir is not None:
        work = Path(workdir).expanduser()
        if not work.is_dir():
            raise BadInput(f"--workdir {workdir} is not a directory; give the directory holding your code")
        work = work.resolve()
    script_path = _script_path(script, work)

    template_path = None
    if template is not None:
        template_path = Path(template).expanduser()
        check_file(template_path, f"--template {template}", "give the path of a Jinja2 torchrun template")
        from gpuprov.launch import render  # jinja2: only when a template is given

        render.load(template_path, label=f"--template {template}")  # its syntax, before any host

    sbatch_path = None
    if emit_sbatch is not None:
        sbatch_path = Path(emit_sbatch).expanduser()
        if sbatch_path.is_dir():
            raise BadInput(f"--emit-sbatch {emit_sbatch} is a directory; give a file name")
        if not sbatch_path.parent.is_dir():
            raise BadInput(
                f"--emit-sbatch {emit_sbatch}: directory {sbatch_path.parent} does not exist; "
                "create it first or give a file in an existing directory"
            )

    merged: dict[str, str] = {}
    if env_file is not None:
        merged.update(read_env_file(Path(env_file).expanduser(), env_file))
    for item in env:
        name, value = parse_env_pair(item, "--env")
        merged[name] = value  # --env wins over --env-file

    return LaunchOptions(
        script=script_path,
        script_args=tuple(script_args),
        inventory=Path(inventory).expanduser() if inventory is not None else None,
        nodes=nodes,
        hosts=host_names,
        nproc=parse_nproc(nproc),
        env=merged,
        workdir=work,
        include_large=include_large,
        max_file_mb=max_file_mb,
        master_port=master_port,
        rdzv=rdzv,
        max_restarts=max_restarts,
        detach=detach,
        dry_run=dry_run,
        emit_sbatch=sbatch_path,
        template=template_path,
        grace_s=grace,
        scheduler=scheduler,
    )


def parse_grace(value: float | str) -> float:
    """--grace: finite seconds in (0, MAX_GRACE_S]; inf or nan would leave a stopped job running."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not valid_grace(seconds):
        raise BadInput(
            f"--grace {value} is not valid: give the seconds between SIGTERM and SIGKILL, "
            f"more than 0 and at most {MAX_GRACE_S:.0f}"
        )
    return seconds


def check_file(path: Path, label: str, hint: str) -> None:
    """path is a file this process can read; else one line saying what it is instead."""
    if path.is_dir():
        raise BadInput(f"{label} is a directory; {hint}")
    if not path.is_file():
        raise BadInput(f"{label} does not exist; {hint}")


def _script_path(script: str, workdir: Path | None) -> Path:
    """The script as a local file; a relative name is looked up in --workdir and here.

    A name that finds two different files, or a script outside the workdir with the name of a file at the
    workdir's top (both would be pushed as one file of that name), is refused: only one could run.
    """
    hint = "give the path of your training script"
    given = Path(script).expanduser()
    candidates = [given]
    if workdir is not None and not given.is_absolute():
        candidates.insert(0, workdir / given)
    found = [c.resolve() for c in candidates if c.is_file()]
    if not found:
        if any(c.is_dir() for c in candidates):
            raise BadInput(f"script {script} is a directory; {hint}")
        where = f" (looked in {workdir} and {Path.cwd()})" if workdir is not None else ""
        raise BadInput(f"script {script} does not exist{where}; {hint}")
    if len(set(found)) > 1:
        raise BadInput(
            f"script {script} names two files, {found[0]} (in --workdir) and {found[1]}, and only one "
            f"can be pushed as {found[0].name}: give the workdir's as {found[0]}, or rename one"
        )
    path = found[0]
    if workdir is not None and not path.is_relative_to(workdir):
        twin = workdir / path.name
        if twin.exists() or twin.is_symlink():
            raise BadInput(
                f"script {path} is outside --workdir {workdir}, which has a {path.name} of its own "
                f"({twin}); both would be pushed as {path.name}: move the script into the workdir or "
                "rename one"
            )
    return path
