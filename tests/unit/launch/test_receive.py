"""receive.py, the host's end of launch's push, run here as push runs it there: `python -c <its text>
JOB_DIR` through a shell, in a home of its own, talking over its stdin and stdout as over the SSH channel."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from gpuprov.launch import push

JOB_DIR = ".gpuprov/jobs/20250101-000000-abcd"


def start_receive(home: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """receive.py for JOB_DIR, run as push runs it on a host whose home is `home`."""
    return subprocess.Popen(
        ["sh", "-c", push.receive_command(sys.executable, JOB_DIR)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", **(env or {})},
    )  # fmt: skip


def _receive(home: Path, files: dict[str, bytes], extra: dict[str, bytes], then: str = "") -> list[object]:
    """Push files (rel -> content) and extra files; the host's answers, in order."""
    proc = start_receive(home)
    assert proc.stdin is not None and proc.stdout is not None
    shas = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    header = {
        "files": [[shas[rel], len(data), rel, rel.endswith(".sh")] for rel, data in files.items()],
        "extra": [[name, len(data)] for name, data in extra.items()],
    }
    proc.stdin.write(json.dumps(header).encode() + b"\n")
    proc.stdin.flush()
    wanted = json.loads(proc.stdout.readline())
    by_sha = {shas[rel]: data for rel, data in files.items()}
    for sha in wanted:
        proc.stdin.write(by_sha[sha])
    for data in extra.values():
        proc.stdin.write(data)
    proc.stdin.flush()
    done = json.loads(proc.stdout.readline() or "null")
    proc.stdin.write(then.encode())
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    return [wanted, done]


def test_files_land_private_and_linked_and_a_second_push_sends_only_what_changed(tmp_path: Path) -> None:
    files = {"train.py": b"print(1)\n", "pkg/util.py": b"X = 1\n", "pkg/copy.py": b"X = 1\n", "go.sh": b"#!"}
    wanted, done = _receive(tmp_path, files, {"run.sh": b"torchrun\n", "job_id": b"abcd"})
    assert len(wanted) == 3 and done == {"ok": True, "sent": 3}  # util.py and copy.py: one stored file
    job = tmp_path / JOB_DIR
    assert (job / "work" / "pkg" / "util.py").read_bytes() == b"X = 1\n"
    assert (job / "work" / "pkg" / "util.py").samefile(job / "work" / "pkg" / "copy.py")
    assert (job / "run.sh").read_bytes() == b"torchrun\n"
    assert (job / "run.sh").stat().st_mode & 0o777 == 0o600
    assert (job / "work" / "go.sh").stat().st_mode & 0o777 == 0o700
    for folder in (tmp_path / ".gpuprov", tmp_path / ".gpuprov" / "files", job):
        assert folder.stat().st_mode & 0o777 == 0o700
    assert not (job / "pgid").exists()  # end of input: nothing started

    files["train.py"] = b"print(2)\n"
    wanted, done = _receive(tmp_path, files, {"run.sh": b"torchrun\n"})
    assert wanted == [hashlib.sha256(b"print(2)\n").hexdigest()] and done == {"ok": True, "sent": 1}
    assert (tmp_path / JOB_DIR / "work" / "train.py").read_bytes() == b"print(2)\n"


def test_a_damaged_file_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["sh", "-c", push.receive_command(sys.executable, JOB_DIR)],
        input=json.dumps({"files": [["0" * 64, 3, "a.py", False]], "extra": []}).encode() + b"\nabc",
        capture_output=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert proc.returncode == 1
    assert b"damaged" in proc.stderr
    assert list((tmp_path / ".gpuprov" / "files").iterdir()) == []
