"""`gpuprov bootstrap`: apply playbooks/site.yml to an inventory through ansible-runner.

- arguments.py: every ansible-runner argument, built in one place (and unit-tested).
- preflight.py: SSH, host key, sudo, OS and lock checks on all hosts before Ansible starts.
- runner.py: the one wrapper around ansible_runner.run (temp private data dir, Ctrl-C, events).
- events.py / display.py: per-host progress from runner's events, live or as plain lines, and tables.
- runs.py: run directories under the state dir, with summary.json.
- core.py: the order of it all (`core.run(arguments.Options(...))`); command.py: the click command.

Nothing is imported here: `gpuprov --help` loads command.py alone, not Ansible's or paramiko's modules.
"""
