"""`gpuprov launch`: one torchrun job across inventory hosts, with preflight, live prefixed logs,
fail-fast teardown and job control (jobs / logs / stop).

Modules: options (input checks), selection (inventory and hosts), preflight, render (templates),
push (SFTP), agent (the remote half, copied to each host), stream (live output), runner (the flow),
jobs (local job records), sbatch (--emit-sbatch), commands (the click commands).
"""
