"""`gpuprov bench`: training throughput and its scaling over GPUs and nodes, measured with `gpuprov launch`.

- command.py: the click command (registered in gpuprov.cli).
- options.py: its options, each written once (gpuprov.cli_options), checked before any host (no torch).
- run.py: the runs, one launch job per rung of the ladder (1 GPU, one node, 2..N nodes), and their results.
- scaling.py: speedup, efficiency and the cross-node factor: pure arithmetic.
- references.py: published figures (with source and method) to compare with.
- check_record.py: the bus bandwidth `gpuprov check` last measured on the same hosts (check.store).
- report.py: the table, the terminal chart, JSON, CSV and PNG.

The program that runs on the nodes (torch only) is gpuprov.onhost's bench_node with bench_models.
"""
