"""`gpuprov launch`: one job across inventory hosts, with preflight, live prefixed logs, fail-fast teardown
and job control (jobs / logs / stop).

A launch is which hosts (selection), where ranks start (schedulers/: ssh, slurm), how (launchers/:
torchrun) and in what (environments/: host-python); each joint is an interface with a registry by name
(docs/developers/extending-launch.md). Other packages use launch only through api.py.

Modules: api (the public API: run a job on named hosts, its log, host choice), commands (the click
commands), options (input checks), selection (inventory and hosts), schedulers (where: over_ssh,
through_slurm), launchers (how: torchrun), environments (in what: host_python), preflight (checks on every
host before anything starts: SSH, the environment's answers, the port test), plan (hosts, preflight,
per-host scripts), render (Jinja2 templates), push (SFTP), flow (an SSH launch: plan, push, start, attached
or detached), attached (this client attached to a job's hosts: output, exits, teardown), stopping (stop a
job on hosts), control (jobs / logs / stop from a job's record), remote (job paths and agent commands),
stream (live output), jobs (local job records), sbatch (--emit-sbatch), slurm (--scheduler slurm),
image_push (--push-image: stream an image to the hosts whose engine lacks it), image_archive (where the
pushed image comes from on the controller: its engine's save, or an archive file).
"""
