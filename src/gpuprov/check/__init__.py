"""`gpuprov check`: is the cluster what the lock says, healthy, and as fast as its hardware allows.

results (the result model and the exit code), parsers (tool outputs, tested against recorded real ones),
xid (the Xid events that need action), hostprobe (the stdlib program each host runs, one SSH round trip),
gather (runs it on every host at once), host_checks and cross_checks (turn what was gathered into results),
ports (the reachability test between hosts), bandwidth (the all-reduce through gpuprov launch), output,
store (the run's results in the state dir), command (the click command).
"""
