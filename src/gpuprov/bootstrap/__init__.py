"""`gpuprov bootstrap`: apply playbooks/site.yml to an inventory through the Ansible engine (gpuprov.ansible).

- command.py: the click command and its options, each written once (BootstrapOptions), then core.run.
- core.py: the verb: its playbook, and its preflight run before Ansible starts (engine.run_playbook's checks).
- preflight.py: SSH, host key, sudo, OS and lock checks on all hosts before Ansible starts.

Nothing is imported here: `gpuprov --help` loads command.py alone, not Ansible's or paramiko's modules.
"""
