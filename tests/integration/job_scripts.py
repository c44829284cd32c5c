"""Training scripts the launch tests (SSH and Slurm) run on the sandbox nodes."""

from __future__ import annotations

from pathlib import Path

# Ranks that sleep (rank 1 exits 3 after a moment when CRASH is set): no collective, so only the launcher's
# teardown (gpuprov's, or Slurm's --kill-on-bad-exit) can end the survivors.
SLEEPER = """
import os, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} up", flush=True)
if os.environ.get("CRASH") and rank == 1:
    time.sleep(1.0)
    print("rank 1 fails now", flush=True)
    sys.exit(3)
time.sleep(300)
"""


def write_sleeper(directory: Path) -> Path:
    path = directory / "sleeper.py"
    path.write_text(SLEEPER)
    return path
