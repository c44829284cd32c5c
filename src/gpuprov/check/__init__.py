"""`gpuprov check`: is the cluster what the lock says, healthy, and as fast as its hardware allows.

- command.py: the click command; it raises errors.Finished with the run's exit code.
- options.py: its options, each written once (gpuprov.cli_options), and the check names --only/--skip take.
- flow.py: from the options to the exit code: input, gather, the checks, the table, the stored results.
- gather.py: runs gpuprov.onhost's hostprobe on every host at once, one SSH round trip each.
- host_view.py: what a per-host check reads: a host's gathered data, its inventory variables, the lock.
- expected.py: what each host should have: the lock, the roles' defaults, the inventory's variables.
- host_checks.py: the per-host checks by name (CHECKS: the names --only/--skip take, in table order).
- version_checks.py: installed versions against the lock: driver, CUDA, cuDNN, NCCL, holds, the env.
- gpu_checks.py: count, driver, persistence, Xid, memory, matmul, clocks, PCIe, NVLink, peermem, fabric, DKMS.
- network_checks.py: the sysctls network_tuning set, /etc/nccl.conf, the NCCL interface, InfiniBand.
- nvlink_fabric.py: NVLink 5 (fabric manager and ib_umad where a VPD names SW_MNG) and IMEX.
- cross_checks.py: checks across hosts (the versions agree; the odd host out is named).
- ports.py: the rendezvous and NCCL/gloo ports reached from every other host (gpuprov.porttest).
- bandwidth.py: the all-reduce's bus bandwidth across the hosts, through gpuprov launch.
- busbw_threshold.py: the bandwidth threshold: inventory, else hardware (network; one host: topology).
- busbw_systems.py: published ring all-reduce figures of whole systems (H100/H200/A100 SXM on NVSwitches).
- gpu_topology.py: which GPU pairs NVLink joins, from `nvidia-smi topo -m`.
- parsers.py: parsers of the NVIDIA and RDMA tools' outputs, tested against recorded real ones.
- xid.py: the Xid events that need action, with their meaning and source.
- results.py: the result model, the verdict helper and the exit code of a run.
- output.py: the table (rich or plain lines), failures first, or every result as JSON (--json).
- figures.py: the figures measured (busbw and its threshold, matmul TFLOPS per host, versions) for the table
  at the end.
- store.py: a run's results kept in the state dir (bench reads the last bandwidth from it).
- api.py: check as a gate for other verbs (upgrade): the named hosts with a given lock, their failures.
"""
