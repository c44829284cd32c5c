"""`gpuprov bench`: training throughput and its scaling over GPUs and nodes, measured with `gpuprov launch`.

Modules: options (input checks, no torch), models and node (pushed to the nodes: torch only), ladder
(which runs make a --scaling ladder), scaling (speedup, efficiency, cross-node factor: pure arithmetic),
references (published figures to compare with), report (table, chart, JSON/CSV/PNG), run (the runs through
gpuprov.launch), command (the click command).
"""
