"""The options of `gpuprov launch`, checked before anything touches a host.

Every check here works on local input only (files, numbers, names); what needs the hosts is preflight's.
"""

from __future__ import annotations

import math
import re
import shlex
import stat
from dataclasses import dataclass, replace
from pathlib import Path

import click

from gpuprov import cli_options, host_options
from gpuprov.cli_options import Param
from gpuprov.errors import BadInput
from gpuprov.launch.jobs import MAX_GRACE_S, valid_grace
from gpuprov.launch.launchers import DEFAULT as DEFAULT_LAUNCHER
from gpuprov.launch.launchers import LAUNCHERS
from gpuprov.launch.schedulers import DEFAULT as DEFAULT_SCHEDULER
from gpuprov.launch.schedulers import NAMES as SCHEDULERS

DEFAULT_MASTER_PORT = 29500
MASTER_PORT_SEARCH = 100  # without --master-port: the first free port in 29500..29599
DEFAULT_GRACE_S = 5.0
DEFAULT_MAX_FILE_MB = 10
RDZV_CHOICES = ("static", "c10d")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by gpuprov itself for every job; a user value would break teardown or log prefixes.
RESERVED_ENV = ("GPUPROV_JOB_ID", *(n for each in LAUNCHERS.values() for n in each.reserved_env))


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


_ENV_HELP = "Environment variable for the job (repeatable)."
_ENV_FILE_HELP = "File of K=V lines for the job's environment."


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
        place = f"--env-file {label} line {number}"
        name, value = _env_file_pair(line, place)
        try:
            words = shlex.split(value) if value.strip() else [""]
        except ValueError as exc:
            raise BadInput(f"{place} ({name}): {exc}; quote the value as a shell would") from None
        env[name] = " ".join(words)
    return env


def _env_file_pair(line: str, where: str) -> tuple[str, str]:
    """NAME and VALUE of an env file's line. A file's lines may be secrets: a message names the line and
    the key, never the value (nor a line with no '=', which has no key to tell from a value)."""
    name, sep, _ = line.partition("=")
    name = name.strip()
    if not sep:
        key = line.partition(":")[0].strip()
        if ":" in line and _ENV_NAME.match(key):
            raise BadInput(f"{where} ({key}) is 'NAME: VALUE'; write it as {key}=VALUE")
        raise BadInput(f"{where} has no '=' (the line is not shown, it may hold a secret); write NAME=VALUE")
    if not _ENV_NAME.match(name):
        raise BadInput(
            f"{where}: the name {name!r} is not valid; a name is letters, digits and '_', not starting with "
            "a digit"
        )
    return parse_env_pair(line, where)


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


def _environment(pairs: tuple[str, ...], env_file: str | None) -> dict[str, str]:
    """--env-file's variables, then --env's (which win)."""
    merged: dict[str, str] = {}
    if env_file is not None:
        merged.update(read_env_file(Path(env_file).expanduser(), env_file))
    for item in pairs:
        name, value = parse_env_pair(item, "--env")
        merged[name] = value
    return merged


def _workdir(given: str | None) -> Path | None:
    if given is None:
        return None
    work = Path(given).expanduser()
    if not work.is_dir():
        raise BadInput(f"--workdir {given} is not a directory; give the directory holding your code")
    return work.resolve()


def _master_port(given: int | None) -> int | None:
    if given is not None and not 1 <= given <= 65535:
        raise BadInput(f"--master-port {given} is not a TCP port (1-65535)")
    return given


def _template(given: str | None) -> Path | None:
    if given is None:
        return None
    path = Path(given).expanduser()
    check_file(path, f"--template {given}", "give the path of a Jinja2 torchrun template")
    from gpuprov.launch import render  # jinja2: only when a template is given

    render.load(path, label=f"--template {given}")  # its syntax, before any host
    return path


def not_a_regular_file(path: Path) -> str | None:
    """What path is when it exists and is not a regular file ('a FIFO'; a link is never followed)."""
    try:
        mode = path.lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new path (its directory is checked apart)
        return None
    kinds = {
        stat.S_ISLNK: "a symbolic link", stat.S_ISDIR: "a directory", stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device", stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket",
    }  # fmt: skip
    return next((kind for test, kind in kinds.items() if test(mode)), None)


def _sbatch_path(given: str | None) -> Path | None:
    """A new path or a regular file: the script is renamed over it, which would replace a device node, a
    FIFO or a link (not what it points to) with a regular file."""
    if given is None:
        return None
    path = Path(given).expanduser()
    kind = not_a_regular_file(path)
    if kind is not None:
        raise BadInput(
            f"--emit-sbatch {given} is {kind}, not a regular file; give a new file name or a regular file "
            "to replace"
        )
    if not path.parent.is_dir():
        raise BadInput(
            f"--emit-sbatch {given}: directory {path.parent} does not exist; "
            "create it first or give a file in an existing directory"
        )
    return path


def launcher_option() -> str:
    """--launcher: how each host's ranks are started (gpuprov.launch.launchers); launch and bench."""
    names = tuple(LAUNCHERS)
    return cli_options.option(
        "--launcher",
        type=click.Choice(names),
        default=DEFAULT_LAUNCHER,
        show_default=True,
        help="torchrun: one torchrun per host; mpirun: Open MPI's mpirun on the first host starts every "
        "rank (hosts need the mpi role: docs/mpi.md).",
        parse=cli_options.one_of(names),
    )


# An image reference as engines write it (NAME[:TAG][@sha256:DIGEST]); one word, never an option.
_IMAGE_REFERENCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")


def parse_image(given: str | None) -> str | None:
    """--image: one image reference as engines take it (the hosts' engines judge the rest in preflight)."""
    if given is None:
        return None
    if not _IMAGE_REFERENCE.fullmatch(given) or given.endswith((":", "@", "/")):
        raise BadInput(
            f"--image {given!r} is not an image reference; give NAME[:TAG][@sha256:DIGEST], e.g. "
            "nvcr.io/nvidia/pytorch:25.01-py3@sha256:..."
        )
    return given


def image_option(help: str) -> str | None:
    """--image IMAGE, stored as `image` (launch, check, bench); help says what runs inside the image."""
    return cli_options.option("--image", default=None, metavar="IMAGE", help=help, parse=parse_image)


def _script_args(given: tuple[str, ...]) -> tuple[str, ...]:
    # `SCRIPT -- ARGS`: the separator is gpuprov's, not the script's
    return tuple(given[1:] if given[:1] == ("--",) else given)


@dataclass(frozen=True)
class LaunchOptions:
    """Every option of `gpuprov launch`, each written once: its field, click option and check.

    The inventory is -i only: launch's positional arguments are SCRIPT and the script's own
    (`gpuprov launch train.py --lr 0.1`), which an optional INVENTORY before them would make ambiguous.
    """

    script: Path = cli_options.argument(parse=Path)
    script_args: tuple[str, ...] = cli_options.argument(nargs=-1, type=click.UNPROCESSED, parse=_script_args)
    inventory: Path | None = host_options.inventory_option()
    limit: str | None = host_options.limit()
    nodes: int | None = host_options.nodes()
    hosts: tuple[str, ...] = host_options.hosts()
    nproc: Nproc = cli_options.option(
        "--nproc-per-node",
        default="auto",
        show_default=True,
        help="Processes per host: a number, 'gpu' (one per GPU) or 'auto' (one per GPU, 1 without GPUs: "
        "gloo).",
        parse=parse_nproc,
    )
    env: dict[str, str] = cli_options.field(
        Param("option", ("--env",), {"multiple": True, "metavar": "K=V", "help": _ENV_HELP}),
        Param("option", ("--env-file",), {"default": None, "help": _ENV_FILE_HELP}, name="env_file"),
        parse=_environment,
    )
    workdir: Path | None = cli_options.option(
        "--workdir",
        default=None,
        help="Directory to push with the script (without .git and large files).",
        parse=_workdir,
    )
    include_large: bool = cli_options.flag(
        "--include-large", help="Push workdir files over --max-file-mb too."
    )
    max_file_mb: int = cli_options.option(
        "--max-file-mb",
        type=int,
        default=DEFAULT_MAX_FILE_MB,
        show_default=True,
        help="Workdir files larger than this are not pushed (unless --include-large).",
        parse=cli_options.at_least(1),
    )
    master_port: int | None = cli_options.option(
        "--master-port",
        type=int,
        default=None,
        help="Rendezvous port on the master [default: first free from 29500].",
        parse=_master_port,
    )
    rdzv: str = cli_options.option(
        "--rdzv",
        type=click.Choice(RDZV_CHOICES),
        default="static",
        show_default=True,
        help="static: fixed node ranks, master addr/port; c10d: c10d rendezvous on the master.",
        parse=cli_options.one_of(RDZV_CHOICES),
    )
    max_restarts: int = cli_options.option(
        "--max-restarts",
        type=int,
        default=0,
        show_default=True,
        help="torchrun --max-restarts.",
        parse=cli_options.at_least(0),
    )
    grace_s: float = cli_options.option(
        "--grace",
        default=str(DEFAULT_GRACE_S),
        show_default=True,
        help=f"Seconds between SIGTERM and SIGKILL when the job is torn down (at most {MAX_GRACE_S:.0f}).",
        parse=parse_grace,
    )
    template: Path | None = cli_options.option(
        "--template",
        default=None,
        help="Jinja2 template for the per-host torchrun script "
        "[default: templates/torchrun.sh.j2; or the inventory var gpuprov_torchrun_template].",
        parse=_template,
    )
    detach: bool = cli_options.flag(
        "--detach", help="Start the job and return; follow it with `gpuprov logs JOB -f`."
    )
    dry_run: bool = cli_options.flag(
        "--dry-run", help="Run preflight and print each host's exact command; start nothing."
    )
    emit_sbatch: Path | None = cli_options.option(
        "--emit-sbatch",
        default=None,
        metavar="FILE",
        help="Write an sbatch script for the same job; start nothing.",
        parse=_sbatch_path,
    )
    image: str | None = image_option(
        "Run the ranks inside this container image on every host (docker or podman; see "
        "docs/containers.md). Best given by digest (NAME@sha256:...)."
    )
    push_image: bool = cli_options.flag(
        "--push-image",
        help="Stream --image from this machine to the hosts that lack it (no registry needed).",
    )
    scheduler: str = cli_options.option(  # "slurm": submitted to Slurm (gpuprov.launch.slurm)
        "--scheduler",
        type=click.Choice(SCHEDULERS),
        default=DEFAULT_SCHEDULER,
        show_default=True,
        help="ssh: gpuprov starts torchrun on each host; slurm: submit with sbatch on the inventory's "
        "[slurm_controller] (srun + torchrun).",
        parse=cli_options.one_of(SCHEDULERS),
    )
    launcher: str = launcher_option()


def _finish(opts: LaunchOptions) -> LaunchOptions:
    """The rules between options; the script looked up in --workdir."""
    host_options.check_selection(opts.nodes, opts.hosts)
    if opts.push_image and opts.image is None:
        raise BadInput("--push-image needs --image: name the image to push")
    if opts.detach and opts.dry_run:
        raise BadInput("--detach and --dry-run exclude each other")
    if opts.limit is not None and opts.scheduler == "slurm":
        raise BadInput("--limit picks hosts for SSH launching; with --scheduler slurm give --nodes N")
    if opts.limit is not None and opts.emit_sbatch is not None:
        # The script asks Slurm for a node count only (inventory names need not be Slurm's node names), so
        # `--limit 'gpu_nodes:!node3'` would not keep the job off node3: refused rather than misleading.
        raise BadInput(
            "--limit picks hosts for SSH launching; an --emit-sbatch script asks Slurm for a node count and "
            "Slurm picks the nodes: give --nodes N (and drain a node in Slurm to keep jobs off it)"
        )
    if opts.launcher == "mpirun" and (opts.max_restarts or opts.rdzv != "static"):
        given = f"--max-restarts {opts.max_restarts}" if opts.max_restarts else f"--rdzv {opts.rdzv}"
        raise BadInput(
            f"{given} is torchrun's; mpirun neither restarts ranks nor holds a rendezvous (rank 0 on the "
            "first host is the master): leave it out, or use --launcher torchrun"
        )
    if opts.launcher == "mpirun" and opts.image is not None:
        # mpirun's daemons reach the other hosts over the run user's SSH on the hosts, not inside the image.
        raise BadInput(
            "--launcher mpirun with --image is not supported: mpirun starts its daemons over SSH on the "
            "hosts, outside the image; use --launcher torchrun with --image (docs/containers.md)"
        )
    return replace(opts, script=_script_path(str(opts.script), opts.workdir))


LAUNCH = cli_options.OptionSet(LaunchOptions, _finish)


def build(**raw: object) -> LaunchOptions:
    """The options from raw values keyed as click passes them (tests); BadInput for the first wrong one."""
    return LAUNCH.build(raw)
