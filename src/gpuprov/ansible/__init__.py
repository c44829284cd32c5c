"""The one Ansible engine: any verb runs a playbook of its own through `engine.run_playbook`.

- arguments.py: the options dataclass, -e parsing, and every ansible-runner argument, built in one place.
- runner.py: the one wrapper around ansible_runner.run (temp private data dir, Ctrl-C, events).
- events.py: runner's events folded into per-host progress, and the versions the roles verified.
- timing.py: each role's and task's time on each host, from the events (the record an estimate reads).
- estimate.py: the tasks done and the time left, estimated from the last run like this one.
- display.py: that progress shown live (the time left under the table) or as plain lines, and the tables
  at the end.
- runs.py: run directories under the state dir, with summary.json (which names the verb of the run).
- recorded_versions.py: the versions each host's roles last verified, from the run records of an inventory.
- engine.py: the order of it all: input, run directory, the verb's own checks, the playbook, the verdict.

Nothing is imported here: a verb's click command can import `gpuprov.ansible.arguments` without loading
Ansible or ansible-runner.
"""
