"""`gpuprov lock ...`: the compatibility lock on its own, without changing any host.

- command.py: the `lock` command group and `lock check`'s options (LockCheckOptions), each written once.
- lock_file.py: reads the LOCK file (`gpu_stack:` as in group_vars, or the fields alone), one-line errors.
- checking.py: `lock check`: the table checks (gpuprov.lock), and with an inventory the preflight of every
  host (gpuprov.host_preflight: SSH, sudo, Python, OS, NVIDIA's repository for the OS, the GPU generation),
  shown as a table or JSON, with preflight's exit codes.

Nothing is imported here: `gpuprov --help` loads command.py alone.
"""
