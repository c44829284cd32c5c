"""`gpuprov bootstrap`: apply playbooks/site.yml to an inventory through the Ansible engine (gpuprov.ansible).

- command.py: the click command and its options, each written once (BootstrapOptions), then core.run.
- core.py: the verb: its playbook, and the preflight (gpuprov.host_preflight: SSH, host key, sudo, OS, lock
  and GPU generation on all hosts) run before Ansible starts (engine.run_playbook's checks).

Nothing is imported here: `gpuprov --help` loads command.py alone, not Ansible's or paramiko's modules.
"""
