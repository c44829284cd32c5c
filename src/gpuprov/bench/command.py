"""The click command `gpuprov bench` (registered in gpuprov.cli)."""

from __future__ import annotations

import json

import click

from gpuprov import console
from gpuprov.launch import host_options

from . import options, report


@click.command("bench", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("inventory", required=False)
@click.option(
    "--model", default="resnet50", show_default=True, help=f"One of {', '.join(options.DEFAULT_BATCH)}."
)
@host_options.host_selection
@click.option("--scaling", is_flag=True, help="Measure the ladder: 1 GPU, one node, then 2..N nodes.")
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="Images per GPU (weak scaling) [default: 256 for resnet50, 128 for vit_b_16; at most 4 on a CPU].",
)
@click.option(
    "--precision", default="bf16", show_default=True, help="bf16, fp16 (with a GradScaler) or fp32."
)
@click.option(
    "--data",
    default="synthetic",
    show_default=True,
    help="synthetic: input made on the device once; loader: a DataLoader of generated images in host memory.",
)
@click.option("--steps", type=int, default=None, help="Timed steps per window [default: 50; 3 on a CPU].")
@click.option(
    "--warmup", type=int, default=None, help="Steps run first and discarded [default: 20; 2 on a CPU]."
)
@click.option("--windows", type=int, default=None, help="Timed windows [default: 5; 3 on a CPU].")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table.")
@click.option("--out", default=None, metavar="DIR", help="Write bench.json, bench.csv (and bench.png) there.")
def bench(
    inventory: str | None,
    model: str,
    nodes: int | None,
    host_list: str | None,
    scaling: bool,
    batch_size: int | None,
    precision: str,
    data: str,
    steps: int | None,
    warmup: int | None,
    windows: int | None,
    as_json: bool,
    out: str | None,
) -> None:
    """Measure training throughput (img/s) on the inventory's hosts through `gpuprov launch`.

    INVENTORY defaults to $GPUPROV_INVENTORY, else ./inventory.ini. Without GPUs the same program runs on
    the CPU with gloo as a smoke run of every path; its numbers are not throughput figures.
    """
    opts = options.build(
        inventory=inventory,
        nodes=nodes,
        hosts=host_list,
        model=model,
        batch_size=batch_size,
        precision=precision,
        data=data,
        steps=steps,
        warmup=warmup,
        windows=windows,
        scaling=scaling,
        as_json=as_json,
        out=out,
    )
    from . import run  # the launch flow and paramiko: only once the options are good

    if opts.as_json:  # stdout is the JSON alone; the jobs' lines go to stderr
        with console.job_lines_on_stderr():
            runs = run.run_all(opts)
    else:
        runs = run.run_all(opts)
    from gpuprov.launch import selection

    from . import check_record

    # The largest run's hosts: the ones a check's all-hosts busbw must have covered to be quoted here.
    doc = report.document(
        runs, check_record.find(selection.inventory_path(opts.inventory), runs[-1].host_names)
    )
    if opts.as_json:
        console.result(json.dumps(doc, indent=2))
    else:
        report.show(doc)
    if opts.out is not None:
        for path in report.write(doc, opts.out):
            console.success(f"wrote {path}")
