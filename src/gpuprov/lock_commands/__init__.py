"""`gpuprov lock ...`: the compatibility lock on its own, without changing any host.

- command.py: the `lock` command group, `lock check`'s and `lock resolve`'s options (LockCheckOptions,
  LockResolveOptions), each written once.
- (gpuprov.lock_file, shared with upgrade: reads the LOCK file, `gpu_stack:` or the fields alone.)
- checking.py: `lock check`: the table checks (gpuprov.lock), and with an inventory the preflight of every
  host (gpuprov.host_preflight: SSH, sudo, Python, OS, NVIDIA's repository for the OS, the GPU generation),
  shown as a table or JSON, with preflight's exit codes.
- resolve.py: `lock resolve`: the constraints and FILE checked, then metadata.py (each OS's repository and
  the PyTorch index, read through one host of each OS), resolving.py (the newest lock, with reasons), the
  lock confirmed by gpuprov.lock's own checks and written atomically.

Nothing is imported here: `gpuprov --help` loads command.py alone.
"""
