"""The options of `gpuprov bench`, checked before any host is contacted (torch is not needed here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuprov.errors import BadInput
from gpuprov.launch import host_options

# The models node.py can build (models.MODELS; a unit test keeps the two lists equal) and their default
# per-GPU batch: 256 for ResNet-50 as NVIDIA's Deep Learning Examples train it; 128 for ViT-B/16 is
# gpuprov's choice (no published reference batch), half the CNN's since its activations are larger.
DEFAULT_BATCH = {"resnet50": 256, "vit_b_16": 128}
PRECISIONS = ("bf16", "fp16", "fp32")
DATA = ("synthetic", "loader")
MAX_BATCH = 65536


@dataclass(frozen=True)
class BenchOptions:
    inventory: Path | None
    nodes: int | None
    hosts: tuple[str, ...]
    model: str
    batch_size: int
    precision: str
    data: str
    steps: int | None
    warmup: int | None
    windows: int | None
    scaling: bool
    as_json: bool
    out: Path | None

    def node_args(self) -> list[str]:
        """The arguments of node.py for these options."""
        args = ["--model", self.model, "--batch-size", str(self.batch_size)]
        args += ["--precision", self.precision, "--data", self.data]
        for name, value in (("--steps", self.steps), ("--warmup", self.warmup), ("--windows", self.windows)):
            if value is not None:
                args += [name, str(value)]
        return args


def build(
    *,
    inventory: str | None = None,
    nodes: int | None = None,
    hosts: str | None = None,
    model: str = "resnet50",
    batch_size: int | None = None,
    precision: str = "bf16",
    data: str = "synthetic",
    steps: int | None = None,
    warmup: int | None = None,
    windows: int | None = None,
    scaling: bool = False,
    as_json: bool = False,
    out: str | None = None,
) -> BenchOptions:
    """Check every option that needs no host; BadInput (one line, exit 2) for the first wrong one."""
    if model not in DEFAULT_BATCH:
        raise BadInput(f"--model {model!r} is not one gpuprov bench has: choose {', '.join(DEFAULT_BATCH)}")
    if precision not in PRECISIONS:
        raise BadInput(f"--precision {precision!r} is not valid: choose {', '.join(PRECISIONS)}")
    if data not in DATA:
        raise BadInput(f"--data {data!r} is not valid: choose {' or '.join(DATA)}")
    batch = DEFAULT_BATCH[model] if batch_size is None else batch_size
    if not 1 <= batch <= MAX_BATCH:
        raise BadInput(f"--batch-size {batch} is not valid: give the images per GPU, 1 to {MAX_BATCH}")
    for name, value, least in (("--steps", steps, 1), ("--warmup", warmup, 0), ("--windows", windows, 1)):
        if value is not None and value < least:
            raise BadInput(f"{name} {value} is not valid: give {least} or more")
    nodes, host_names = host_options.check(nodes, hosts)
    out_dir = None
    if out is not None:
        out_dir = Path(out).expanduser()
        if out_dir.exists() and not out_dir.is_dir():
            raise BadInput(f"--out {out} is a file; give a directory for the JSON and CSV results")
    return BenchOptions(
        inventory=Path(inventory).expanduser() if inventory is not None else None,
        nodes=nodes,
        hosts=host_names,
        model=model,
        batch_size=batch,
        precision=precision,
        data=data,
        steps=steps,
        warmup=warmup,
        windows=windows,
        scaling=scaling,
        as_json=as_json,
        out=out_dir,
    )
