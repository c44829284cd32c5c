"""Jinja2 rendering of the scripts a launcher writes: each host's script and the sbatch script.

What each host's script says is its launcher's (gpuprov.launch.launchers: torchrun's templates are
templates/torchrun.sh.j2 and templates/sbatch.sh.j2). A user can render the per-host script from a template
of their own with `--template FILE` or the launcher's inventory variable (`gpuprov_torchrun_template`, per
host or group); it gets the same variables (see `HostCommand`).

Templates run in Jinja2's immutable sandbox: a template (which can come from an inventory) renders text
and cannot reach Python's internals, call unsafe methods or change the values it is given. It can
include, import or extend only templates in its own directory. Every mistake in a user's template is a
BadInput naming the template and, where Jinja2 knows it, the line.

Every value reaches a script as one word on one line (`quote`, the templates' `q` filter), comments
included: a newline in a value would end a comment or an `#SBATCH` line and start a command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import jinja2.meta
import jinja2.sandbox

from gpuprov import resources
from gpuprov.errors import BadInput

# ASCII control characters: a newline ends a line of the script (and a comment, and sbatch's #SBATCH block).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# What a Slurm job name keeps: it is also in the --output file name, where '%' and '/' mean something.
_JOB_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def quote(value: object) -> str:
    """value as one shell word on one line: shlex.quote, or bash's $'...' where it has control characters."""
    text = str(value)
    if not _CONTROL.search(text):
        return shlex.quote(text)
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", escaped) + "'"


def job_name(stem: str) -> str:
    """A Slurm job name from a script's name: characters other than letters, digits and ._+- become '_'."""
    return _JOB_NAME_UNSAFE.sub("_", stem)


@dataclass(frozen=True)
class HostCommand:
    """Everything a host's script template sees for one host."""

    job_id: str
    host: str
    node_rank: int
    nnodes: int
    nproc: int
    python: str
    job_dir: str  # relative to the remote user's home
    script: str  # relative to the job's work directory
    script_args: tuple[str, ...]
    master_addr: str
    master_port: int
    rdzv: str
    max_restarts: int
    env: dict[str, str] = field(default_factory=dict)
    # Every host of the job in node-rank order: (its address, its process count); mpirun's hostfile.
    peers: tuple[tuple[str, int], ...] = ()
    # The address its traffic to the peers leaves from (preflight's probe.py route); torchrun's --local-addr.
    local_addr: str | None = None

    @property
    def backend_hint(self) -> str:
        return "GPUs: NCCL" if self.env.get("GPUPROV_GPUS", "0") != "0" else "no GPU: gloo"


def _environment(search_dir: Path) -> jinja2.Environment:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(search_dir)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = quote
    return env


def _not_text(path: Path, exc: UnicodeDecodeError, label: str) -> BadInput:
    data = path.read_bytes()
    line = data[: exc.start].count(b"\n") + 1
    return BadInput(f"{label} line {line} is not UTF-8 text (byte 0x{data[exc.start]:02x}); save it as UTF-8")


def load(path: Path | None, default_name: str = "", label: str | None = None) -> jinja2.Template:
    """The template at path (or gpuprov's own), compiled; BadInput for what a user's template gets wrong."""
    if path is None:
        return _environment(resources.data_dir("templates")).get_template(default_name)
    label = label or f"template {path}"
    try:
        return _environment(path.parent).get_template(path.name)
    except jinja2.TemplateSyntaxError as exc:
        raise BadInput(f"{label} line {exc.lineno}: {exc.message}") from None
    except UnicodeDecodeError as exc:
        raise _not_text(path, exc, label) from None
    except (jinja2.TemplateNotFound, OSError):
        raise BadInput(f"{label} does not exist or cannot be read") from None


def variables(path: Path) -> set[str]:
    """The variables a user's template reads (its own file; what it includes is not followed)."""
    env = _environment(path.parent)
    return set(jinja2.meta.find_undeclared_variables(env.parse(path.read_text())))


def _template_line(exc: BaseException, template: jinja2.Template) -> int | None:
    """The line of the template a rendering error happened on (Jinja2 maps its frames to template lines)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == template.filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def host_script(command: HostCommand, template: Path | None, default_name: str) -> str:
    """A host's script from the user's template, else from gpuprov's own templates/default_name."""
    where = str(template) if template is not None else f"templates/{default_name}"
    compiled = load(template, default_name)
    values = {name: getattr(command, name) for name in command.__dataclass_fields__}
    try:
        return compiled.render(**values, backend_hint=command.backend_hint, template_name=where)
    except jinja2.TemplateNotFound as exc:
        directory = template.parent if template is not None else resources.data_dir("templates")
        raise BadInput(
            f"template {where}: {exc.name!r} not found in {directory}; a template can include, import or "
            "extend only templates in its own directory"
        ) from None
    except Exception as exc:  # a user's template is input: whatever it raises is its mistake
        if template is None:
            raise  # gpuprov's own template failing is a bug: show it
        line = _template_line(exc, compiled)
        message = exc.message if isinstance(exc, jinja2.TemplateError) else f"{type(exc).__name__}: {exc}"
        raise BadInput(f"template {where}{f' line {line}' if line else ''}: {message}") from None


@dataclass(frozen=True)
class SbatchJob:
    job_name: str
    nnodes: int
    nproc: str  # a number, "gpu" or "auto"
    python: str
    workdir: str
    script: str
    script_args: tuple[str, ...]
    master_port: int
    max_restarts: int
    env: dict[str, str]
    launch_args: str
    file_name: str
    # True: workdir is relative to the directory sbatch is run in (gpuprov launch --scheduler slurm).
    workdir_relative: bool = False
    image: str = ""  # --image: the ranks run inside it (launch.environments.container_slurm)
    gpus_per_node: int = 0  # the job's `#SBATCH --gres=gpu:N` (launch.slurm_gpus); 0: no GPU request


def workdir_expr(job: SbatchJob) -> str:
    """The job's work directory in the sbatch script: quoted, under the submit directory when relative."""
    quoted = quote(job.workdir)
    return f'"$SLURM_SUBMIT_DIR"/{quoted}' if job.workdir_relative else quoted


def sbatch_script(job: SbatchJob, template_name: str, **extra: str) -> str:
    """gpuprov's sbatch template template_name with the job's fields, and nproc_expr (the processes per node:
    'gpu' and 'auto' are one per GPU Slurm gave the node, 1 without GPUs), workdir_expr (workdir_expr())
    and what the launcher adds (extra)."""
    fields: dict[str, object] = {name: getattr(job, name) for name in job.__dataclass_fields__}
    # With a GPU request the count is known; SLURM_GPUS_ON_NODE is set from Slurm 21.08 on (gres_gpu.c; not
    # in 19.05 or 20.11), and without it the script would start one rank.
    gpus = str(job.gpus_per_node) if job.gpus_per_node else '"${SLURM_GPUS_ON_NODE:-1}"'
    fields["nproc_expr"] = job.nproc if job.nproc.isdigit() else gpus
    fields["workdir_expr"] = workdir_expr(job)
    return load(None, template_name).render(**fields, **extra)
