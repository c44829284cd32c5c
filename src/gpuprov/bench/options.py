"""The options of `gpuprov bench`, checked before any host is contacted (torch is not needed here)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gpuprov import cli_options, host_options, paths
from gpuprov.errors import BadInput
from gpuprov.launch import api as launch

# The models node.py can build (models.MODELS; a unit test keeps the two lists equal) and their default
# per-GPU batch: 256 for ResNet-50 as NVIDIA's Deep Learning Examples train it; 128 for ViT-B/16 is
# gpuprov's choice (no published reference batch), half the CNN's since its activations are larger.
DEFAULT_BATCH = {"resnet50": 256, "vit_b_16": 128}
# The smallest per-GPU batch each model trains on, and why. ResNet-50 has batch norm: in training it
# normalises by the batch's own statistics, and PyTorch refuses one value per channel ("Expected more than 1
# value per channel when training", torch.nn.functional.batch_norm), which one image gives on a CPU's 32-pixel
# image; on a GPU one image's statistics are no batch's. ViT-B/16 uses layer norm (per image): 1 works.
MIN_BATCH = {"resnet50": 2, "vit_b_16": 1}
MIN_BATCH_WHY = {
    "resnet50": "it trains with batch norm, which needs more than one image per GPU (PyTorch's batch_norm "
    "refuses one value per channel in training)",
    "vit_b_16": "give the images per GPU",
}
PRECISIONS = ("bf16", "fp16", "fp32")
DATA = ("synthetic", "loader")
MAX_BATCH = 65536


def _model(given: str) -> str:
    if given not in DEFAULT_BATCH:
        raise BadInput(f"--model {given!r} is not one gpuprov bench has: choose {', '.join(DEFAULT_BATCH)}")
    return given


OUT_FILES = ("bench.json", "bench.csv", "bench.png")  # what report.write puts in --out


def _out_dir(given: str | None) -> Path | None:
    """--out, once bench could write its results there: found now, not after the whole ladder ran."""
    if given is None:
        return None
    if not given.strip():  # Path("") is ".": the results would land wherever bench was started
        raise BadInput(f"--out {given!r} is empty; give a directory for the results (made when missing)")
    out_dir = Path(given).expanduser()
    where = paths.nearest_existing(out_dir)
    if not where.is_dir():
        below = "" if where == out_dir else f" is below {where}, which"
        raise BadInput(f"--out {given}{below} is a file; give a directory for the results")
    for name in OUT_FILES:
        target = out_dir / name
        if target.exists() and not target.is_file():
            raise BadInput(f"--out {given}: {target} is not a regular file; remove it or give another --out")
    try:
        paths.probe_write(where)
    except OSError as exc:
        raise BadInput(
            f"--out {given} cannot be written ({exc.strerror or exc}); give a directory you can write"
        ) from None
    return out_dir


def _batch(given: int | None) -> int:
    if given is None:
        return 0  # the model's default, which finish knows
    if not 1 <= given <= MAX_BATCH:
        raise BadInput(f"--batch-size {given} is not valid: give the images per GPU, 1 to {MAX_BATCH}")
    return given


_AT_LEAST_1 = cli_options.optional(cli_options.at_least(1))


@dataclass(frozen=True)
class BenchOptions:
    """Every option of `gpuprov bench`, each written once: its field, click option and check."""

    inventory: Path | None = host_options.inventory()
    limit: str | None = host_options.limit()
    model: str = cli_options.option(
        "--model",
        default="resnet50",
        show_default=True,
        help=f"One of {', '.join(DEFAULT_BATCH)}.",
        parse=_model,
    )
    nodes: int | None = host_options.nodes()
    hosts: tuple[str, ...] = host_options.hosts()
    scaling: bool = cli_options.flag(
        "--scaling", help="Measure the ladder: 1 GPU, one node, then 2..N nodes."
    )
    batch_size: int = cli_options.option(  # 0 until finish puts the model's default there
        "--batch-size",
        type=int,
        default=None,
        help="Images per GPU (weak scaling) [default: 256 for resnet50, 128 for vit_b_16; at most 4 on a "
        "CPU].",
        parse=_batch,
    )
    precision: str = cli_options.option(
        "--precision",
        default="bf16",
        show_default=True,
        help="bf16, fp16 (with a GradScaler) or fp32.",
        parse=cli_options.one_of(PRECISIONS),
    )
    data: str = cli_options.option(
        "--data",
        default="synthetic",
        show_default=True,
        help="synthetic: input made on the device once; loader: a DataLoader of generated images in host "
        "memory.",
        parse=cli_options.one_of(DATA),
    )
    steps: int | None = cli_options.option(
        "--steps",
        type=int,
        default=None,
        help="Timed steps per window [default: 50; 3 on a CPU].",
        parse=_AT_LEAST_1,
    )
    warmup: int | None = cli_options.option(
        "--warmup",
        type=int,
        default=None,
        help="Steps run first and discarded [default: 20; 2 on a CPU].",
        parse=cli_options.optional(cli_options.at_least(0)),
    )
    windows: int | None = cli_options.option(
        "--windows", type=int, default=None, help="Timed windows [default: 5; 3 on a CPU].", parse=_AT_LEAST_1
    )
    image: str | None = launch.image_option(
        "Run the benchmark inside this container image on every host (as `gpuprov launch --image`)."
    )
    json: bool = host_options.json_flag("Print the results as JSON instead of the table.")
    launcher: str = launch.launcher_option()
    out: Path | None = cli_options.option(
        "--out",
        default=None,
        metavar="DIR",
        help="Write bench.json, bench.csv (and bench.png) there.",
        parse=_out_dir,
    )

    def node_args(self) -> list[str]:
        """The arguments of node.py for these options."""
        args = ["--model", self.model, "--batch-size", str(self.batch_size)]
        args += ["--precision", self.precision, "--data", self.data]
        for name, value in (("--steps", self.steps), ("--warmup", self.warmup), ("--windows", self.windows)):
            if value is not None:
                args += [name, str(value)]
        return args


def _finish(opts: BenchOptions) -> BenchOptions:
    """The model's batch size unless --batch-size, and one the model can train on; --nodes with --hosts."""
    host_options.check_selection(opts.nodes, opts.hosts)
    smallest = MIN_BATCH[opts.model]
    if opts.batch_size and opts.batch_size < smallest:
        raise BadInput(
            f"--batch-size {opts.batch_size}: {opts.model} needs {smallest} or more images per GPU: "
            f"{MIN_BATCH_WHY[opts.model]}; give --batch-size {smallest} or more"
        )
    return replace(opts, batch_size=opts.batch_size or DEFAULT_BATCH[opts.model])


BENCH = cli_options.OptionSet(BenchOptions, _finish)


def build(**raw: object) -> BenchOptions:
    """The options from raw values keyed as click passes them (tests); BadInput for the first wrong one."""
    return BENCH.build(raw)
