"""The click command `gpuprov bench` (registered in gpuprov.cli)."""

from __future__ import annotations

import dataclasses
import json

import click

from gpuprov import console, host_options

from . import options, report


@click.command("bench", context_settings={"help_option_names": ["-h", "--help"]})
@options.BENCH
def bench(opts: options.BenchOptions) -> None:
    """Measure training throughput (img/s) on the inventory's hosts through `gpuprov launch`.

    INVENTORY (or -i INVENTORY) defaults to $GPUPROV_INVENTORY, else ./inventory.ini; --limit narrows it,
    then --nodes or --hosts pick from what is left. Without GPUs the same program runs on the CPU with
    gloo as a smoke run of every path; its numbers are not throughput figures.
    """
    from . import run  # the launch flow and paramiko: only once the options are good

    # The inventory resolved once (a default named on stderr once, before any host), for every run and the
    # check record below.
    opts = dataclasses.replace(opts, inventory=host_options.inventory_path(opts.inventory))
    if opts.json:  # stdout is the JSON alone; the jobs' lines go to stderr
        with console.job_lines_on_stderr():
            runs = run.run_all(opts)
    else:
        runs = run.run_all(opts)
    from . import check_record

    # The largest run's hosts: the ones a check's all-hosts busbw must have covered to be quoted here.
    assert opts.inventory is not None
    doc = report.document(runs, check_record.find(opts.inventory, runs[-1].host_names))
    if opts.json:
        console.result(json.dumps(doc, indent=2))
    else:
        report.show(doc)
    if opts.out is not None:
        for path in report.write(doc, opts.out):
            console.success(f"wrote {path}")
