"""The options of `gpuprov launch`, checked before anything touches a host.

Every check here works on local input only (files, numbers, names); what needs the hosts is preflight's.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from gpuprov.errors import BadInput

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


def parse_nproc(text: str) -> Nproc:
    value = text.strip().lower()
    if value in ("gpu", "auto"):
        return Nproc(value)
    if value.isdigit() and int(value) >= 1:
        return Nproc("count", int(value))
    raise BadInput(f"--nproc-per-node {text!r} is not valid: give a number >= 1, 'gpu' or 'auto'")


def parse_hosts(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise BadInput(
            "--hosts is empty: give inventory host names separated by commas, e.g. --hosts node1,node2"
        )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise BadInput(f"--hosts names {', '.join(duplicates)} more than once; list each host once")
    return names


def parse_env_pair(text: str, where: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _ENV_NAME.match(name):
        raise BadInput(f"{where}: {text!r} is not NAME=VALUE (a name is letters, digits and '_')")
    if name in RESERVED_ENV:
        raise BadInput(f"{where}: {name} is set by gpuprov for every job and cannot be overridden")
    return name, value


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=VALUE lines; blank lines and '#' comments skipped; values may be shell-quoted."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise BadInput(f"--env-file {path} cannot be read: {exc.strerror or exc}") from None
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        name, value = parse_env_pair(line, f"--env-file {path} line {number}")
        try:
            words = shlex.split(value) if value.strip() else [""]
        except ValueError as exc:
            raise BadInput(f"--env-file {path} line {number}: {exc}") from None
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
    grace_s: float = DEFAULT_GRACE_S,
) -> LaunchOptions:
    """Check every option that needs no host; raise BadInput with one line for the first wrong one."""
    if nodes is not None and hosts is not None:
        raise BadInput("--nodes and --hosts exclude each other: give a count or a list of hosts")
    if nodes is not None and nodes < 1:
        raise BadInput(f"--nodes {nodes} is not valid: give 1 or more")
    if master_port is not None and not 1 <= master_port <= 65535:
        raise BadInput(f"--master-port {master_port} is not a TCP port (1-65535)")
    if rdzv not in RDZV_CHOICES:
        raise BadInput(f"--rdzv {rdzv!r} is not valid: choose {' or '.join(RDZV_CHOICES)}")
    if max_restarts < 0:
        raise BadInput(f"--max-restarts {max_restarts} is not valid: give 0 or more")
    if grace_s <= 0:
        raise BadInput(f"--grace {grace_s} is not valid: give a number of seconds > 0")
    if max_file_mb < 1:
        raise BadInput(f"--max-file-mb {max_file_mb} is not valid: give 1 or more")
    if detach and dry_run:
        raise BadInput("--detach and --dry-run exclude each other")

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
        if not template_path.is_file():
            raise BadInput(
                f"--template {template} does not exist; give the path of a Jinja2 torchrun template"
            )

    merged: dict[str, str] = {}
    if env_file is not None:
        merged.update(read_env_file(Path(env_file).expanduser()))
    for item in env:
        name, value = parse_env_pair(item, "--env")
        merged[name] = value  # --env wins over --env-file

    return LaunchOptions(
        script=script_path,
        script_args=tuple(script_args),
        inventory=Path(inventory).expanduser() if inventory is not None else None,
        nodes=nodes,
        hosts=parse_hosts(hosts) if hosts is not None else (),
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
        emit_sbatch=Path(emit_sbatch).expanduser() if emit_sbatch is not None else None,
        template=template_path,
        grace_s=grace_s,
    )


def _script_path(script: str, workdir: Path | None) -> Path:
    """The script as a local file; relative names are looked up in --workdir first, then here."""
    candidates = [Path(script).expanduser()]
    if workdir is not None and not Path(script).is_absolute():
        candidates.insert(0, workdir / script)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    where = f" (looked in {workdir} and {Path.cwd()})" if workdir is not None else ""
    raise BadInput(f"script {script} does not exist{where}; give the path of your training script")
