"""`gpuprov launch`: one torchrun job across inventory hosts, with preflight, live prefixed logs,
fail-fast teardown and job control (jobs / logs / stop).

Modules: commands (the click commands), options (input checks), selection (inventory and hosts),
preflight (checks on every host before anything starts), plan (hosts, preflight, per-host scripts),
render (templates), push (SFTP), flow (launch: plan, push, start, attached or detached), attached
(this client attached to a job's hosts: output, exits, teardown), stopping (stop a job on hosts),
control (jobs / logs / stop from a job's record), agent (the remote half, copied to each host),
stream (live output), jobs (local job records), sbatch (--emit-sbatch).
"""
