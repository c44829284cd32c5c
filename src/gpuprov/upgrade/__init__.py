"""`gpuprov upgrade NEW_LOCK`: move a live cluster to a new lock, batch by batch, drained, gated, resumable.

- command.py: the click command; options.py: its options, each written once, and their checks.
- core.py: the order of it all: the lock and the inventory (before any host), the hosts' verified versions
  (the run records), the plan, the preflight with the new lock, Slurm's node names; then the rollout.
- plan.py: the plan, pure: which hosts change, the canary, batches of --max-unavailable, the Slurm controller
  last; downgrades refused without --allow-downgrade.
- rollout.py: the batches: out of service, wait for jobs (--drain-timeout, never killed), apply, gate, back
  in service (only what gpuprov drained); the failure budget; the state saved after every step.
- service.py: Slurm's drain, resume, node states and jobs through the controller (scontrol, sinfo, squeue).
- actions.py: the work on hosts: the batch's bootstrap (the Ansible engine), the gate (check's API), the
  gpuprov jobs started over SSH (launch's API).
- state.py: the rollout's state in the state dir, one process at a time (flock).
- progress.py: the lines, the --json events, the time left.

Nothing is imported here: `gpuprov --help` loads command.py alone.
"""
