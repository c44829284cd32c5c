"""The per-host torchrun script and the sbatch script, rendered from Jinja2 templates.

The default templates are templates/torchrun.sh.j2 and templates/sbatch.sh.j2. A user can render the
per-host command from a template of their own with `--template FILE` or the inventory variable
`gpuprov_torchrun_template` (per host or group); it gets the same variables (see `HostCommand`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from gpuprov import resources
from gpuprov.errors import BadInput

TORCHRUN_TEMPLATE = "torchrun.sh.j2"
SBATCH_TEMPLATE = "sbatch.sh.j2"
# torchrun prefixes each worker's line with this (with --tee); the client maps it to host/rank.
LOG_LINE_PREFIX_TEMPLATE = "[rank${rank}]:"


@dataclass(frozen=True)
class HostCommand:
    """Everything the torchrun template sees for one host."""

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

    @property
    def backend_hint(self) -> str:
        return "GPUs: NCCL" if self.env.get("GPUPROV_GPUS", "0") != "0" else "no GPU: gloo"


def _environment(search_dir: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(search_dir)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return env


def _template(path: Path | None, default_name: str) -> jinja2.Template:
    if path is None:
        return _environment(resources.data_dir("templates")).get_template(default_name)
    try:
        return _environment(path.parent).get_template(path.name)
    except jinja2.TemplateSyntaxError as exc:
        raise BadInput(f"template {path} line {exc.lineno}: {exc.message}") from None
    except (jinja2.TemplateNotFound, OSError):
        raise BadInput(f"template {path} does not exist or cannot be read") from None


def torchrun_script(command: HostCommand, template: Path | None = None) -> str:
    """The bash script that runs this host's torchrun (what --dry-run prints)."""
    where = str(template) if template is not None else f"templates/{TORCHRUN_TEMPLATE}"
    try:
        return _template(template, TORCHRUN_TEMPLATE).render(
            **{name: getattr(command, name) for name in command.__dataclass_fields__},
            backend_hint=command.backend_hint,
            template_name=where,
        )
    except jinja2.UndefinedError as exc:
        raise BadInput(f"template {where}: {exc.message}") from None


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


def sbatch_script(job: SbatchJob) -> str:
    """An sbatch script that runs the same job with srun + torchrun (c10d rendezvous on the first node)."""
    fields = {name: getattr(job, name) for name in job.__dataclass_fields__}
    # 'gpu' and 'auto': one process per GPU Slurm gave the node (1 without GPUs).
    fields["nproc_expr"] = job.nproc if job.nproc.isdigit() else '"${SLURM_GPUS_ON_NODE:-1}"'
    return _template(None, SBATCH_TEMPLATE).render(**fields)
