"""network_tuning's files/firewalld-allow.sh removes ipset entries only with "prune" (every node's addresses
were read); with "keep" it only adds. firewall-cmd is replaced by a script that answers `--state` (not
running: the offline command is used), `--info-ipset` in firewalld's layout (name, then indented `type:`,
`options:`, `entries:` lines) and `--list-rich-rules`, and records every other call."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuprov import resources

SCRIPT = resources.data_dir("roles") / "network_tuning" / "files" / "firewalld-allow.sh"
RULES = (
    'rule source ipset="gpuprov-cluster" port port="29400-29599" protocol="tcp" accept\n'
    'rule source ipset="gpuprov-cluster" port port="32768-60999" protocol="tcp" accept\n'
)


def run(tmp_path: Path, prune: str, have: list[str], wanted: list[str]) -> tuple[list[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (tmp_path / "rules").write_text(RULES)
    info = f"gpuprov-cluster\\n  type: hash:net\\n  options: family=inet\\n  entries: {' '.join(have)}\\n"
    fake = f"""#!/bin/sh
case "$*" in
    --state) exit 252 ;;
    *--info-ipset=*) printf '{info}' ;;
    *--list-rich-rules) cat {tmp_path / "rules"} ;;
    *) echo "$*" >> {calls}
       for a in "$@"; do case "$a" in *-from-file=*) cat "${{a#*=}}" >> {calls} ;; esac; done ;;
esac
"""
    for tool in ("firewall-cmd", "firewall-offline-cmd"):
        (bin_dir / tool).write_text(fake)
        (bin_dir / tool).chmod(0o755)
    proc = subprocess.run(
        ["sh", str(SCRIPT), "apply", prune, "", "gpuprov-cluster", "29400-29599,32768-60999", *wanted],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    return proc.stdout.splitlines(), (calls.read_text().splitlines() if calls.exists() else [])


def test_prune_removes_the_entries_no_longer_wanted(tmp_path: Path) -> None:
    out, calls = run(tmp_path, "prune", ["10.0.0.1", "10.0.0.9"], ["10.0.0.1", "10.0.0.2"])
    assert out == ["changed permanent +10.0.0.2", "changed permanent -10.0.0.9"]
    assert "--ipset=gpuprov-cluster --add-entries-from-file" in " ".join(calls)
    assert "--ipset=gpuprov-cluster --remove-entries-from-file" in " ".join(calls)
    assert calls[-1] == "10.0.0.9"


def test_keep_adds_and_removes_nothing(tmp_path: Path) -> None:
    out, calls = run(tmp_path, "keep", ["10.0.0.1", "10.0.0.9"], ["10.0.0.1", "10.0.0.2"])
    assert out == ["changed permanent +10.0.0.2"]
    assert not [c for c in calls if "remove" in c]


def test_a_wrong_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError) as caught:
        run(tmp_path, "maybe", [], ["10.0.0.1"])
    assert caught.value.returncode == 2 and "prune or keep" in caught.value.stderr
