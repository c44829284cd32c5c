"""receive.py, the host's end of launch's push, run here as push runs it there: `python -c <its text>
PYTHON` through a shell, in a home of its own, talking over its stdin and stdout as over the SSH channel."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from gpuprov.launch import push

JOB_DIR = ".gpuprov/jobs/20250101-000000-abcd"


def start_receive(
    home: Path, env: dict[str, str] | None = None, command: str = ""
) -> subprocess.Popen[bytes]:
    """receive.py, run as push runs it on a host whose home is `home`."""
    return subprocess.Popen(
        ["sh", "-c", command or push.receive_command(sys.executable)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", **(env or {})},
    )  # fmt: skip


def _line(proc: subprocess.Popen[bytes]) -> object:
    assert proc.stdout is not None
    return json.loads(proc.stdout.readline() or b"null")


def store_files(proc: subprocess.Popen[bytes], files: dict[str, bytes]) -> tuple[object, object]:
    """Steps 1-2 (push.store): the store's header, the files it lacks; its two answers."""
    assert proc.stdin is not None
    shas = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    unique = {shas[rel]: (data, rel.endswith(".sh")) for rel, data in files.items()}
    header = {"files": [[sha, len(data), exe] for sha, (data, exe) in unique.items()]}
    proc.stdin.write(json.dumps(header).encode() + b"\n")
    proc.stdin.flush()
    first = _line(proc)
    assert isinstance(first, dict)
    for sha in first["missing"]:
        proc.stdin.write(unique[sha][0])
    proc.stdin.flush()
    return first, _line(proc)


def send_job(
    proc: subprocess.Popen[bytes], files: dict[str, bytes], extra: dict[str, bytes], claim: int | None = None
) -> None:
    """Step 3 (push.push after preflight): the job's directory, its links and extra files."""
    assert proc.stdin is not None
    job: dict[str, object] = {
        "job_dir": JOB_DIR,
        "links": [[hashlib.sha256(data).hexdigest(), rel] for rel, data in files.items()],
        "extra": [[name, len(data)] for name, data in extra.items()],
    }
    if claim is not None:
        job["claim"] = claim
    proc.stdin.write(json.dumps(job).encode() + b"\n")
    for data in extra.values():
        proc.stdin.write(data)
    proc.stdin.flush()


def _receive(home: Path, files: dict[str, bytes], extra: dict[str, bytes], then: str = "") -> list[object]:
    """Push files (rel -> content) and extra files; the host's answers, in order."""
    proc = start_receive(home)
    assert proc.stdin is not None
    first, stored = store_files(proc, files)
    send_job(proc, files, extra)
    done = _line(proc)
    proc.stdin.write(then.encode())
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    return [first, stored, done]


def test_files_land_private_and_linked_and_a_second_push_sends_only_what_changed(tmp_path: Path) -> None:
    files = {"train.py": b"print(1)\n", "pkg/util.py": b"X = 1\n", "pkg/copy.py": b"X = 1\n", "go.sh": b"#!"}
    first, stored, done = _receive(tmp_path, files, {"run.sh": b"torchrun\n", "job_id": b"abcd"})
    assert isinstance(first, dict) and first["python"] == sys.executable
    assert len(first["missing"]) == 3 and stored == {"stored": 3}  # util.py and copy.py: one stored file
    assert done == {"ok": True}
    job = tmp_path / JOB_DIR
    assert (job / "work" / "pkg" / "util.py").read_bytes() == b"X = 1\n"
    assert (job / "work" / "pkg" / "util.py").samefile(job / "work" / "pkg" / "copy.py")
    assert (job / "run.sh").read_bytes() == b"torchrun\n"
    assert (job / "run.sh").stat().st_mode & 0o777 == 0o600
    assert (job / "work" / "go.sh").stat().st_mode & 0o777 == 0o700
    mine = tmp_path / ".gpuprov"
    for folder in (mine, mine / "files", mine / "jobs", job):
        assert folder.stat().st_mode & 0o777 == 0o700
    assert not (job / "pgid").exists()  # end of input: nothing started

    files["train.py"] = b"print(2)\n"
    first, stored, done = _receive(tmp_path, files, {"run.sh": b"torchrun\n"})
    assert isinstance(first, dict) and first["missing"] == [hashlib.sha256(b"print(2)\n").hexdigest()]
    assert stored == {"stored": 1} and done == {"ok": True}
    assert (tmp_path / JOB_DIR / "work" / "train.py").read_bytes() == b"print(2)\n"


def test_end_of_input_after_the_store_leaves_no_job_directory(tmp_path: Path) -> None:
    """A failed preflight closes the channel of the push started beside it: complete files in the store,
    no job directory, nothing started, exit 0."""
    proc = start_receive(tmp_path)
    assert proc.stdin is not None
    _, stored = store_files(proc, {"train.py": b"print(1)\n"})
    assert stored == {"stored": 1}
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert [p.name for p in (tmp_path / ".gpuprov").iterdir()] == ["files"]
    assert len(list((tmp_path / ".gpuprov" / "files").iterdir())) == 1


def test_the_python_chosen_by_shell_lines_is_named_in_the_first_answer(tmp_path: Path) -> None:
    """The push started beside preflight runs the environment's choice ($py); its answer names it, for the
    controller to compare with the python preflight found."""
    link = tmp_path / "envpython"
    link.symlink_to(sys.executable)
    command = push.receive_command_choosing(f"py={link}")
    proc = start_receive(tmp_path, command=command)
    assert proc.stdin is not None
    first, stored = store_files(proc, {})
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert first == {"python": str(link), "missing": []} and stored == {"stored": 0}


def test_a_job_directory_outside_the_jobs_folder_and_a_link_outside_work_are_refused(tmp_path: Path) -> None:
    for job_dir, rel in ((".gpuprov/files", "a.py"), (".gpuprov/jobs/../x", "a.py"), (JOB_DIR, "../../a.py")):
        proc = start_receive(tmp_path)
        assert proc.stdin is not None and proc.stderr is not None
        store_files(proc, {"a.py": b"1"})
        job = {"job_dir": job_dir, "links": [[hashlib.sha256(b"1").hexdigest(), rel]], "extra": []}
        proc.stdin.write(json.dumps(job).encode() + b"\n")
        proc.stdin.close()
        assert proc.wait(timeout=30) == 1
        assert b"refusing" in proc.stderr.read()


def test_a_damaged_file_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["sh", "-c", push.receive_command(sys.executable)],
        input=json.dumps({"files": [["0" * 64, 3, False]]}).encode() + b"\nabc",
        capture_output=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert proc.returncode == 1
    assert b"damaged" in proc.stderr
    assert list((tmp_path / ".gpuprov" / "files").iterdir()) == []


def test_a_stored_file_cut_short_is_sent_again(tmp_path: Path) -> None:
    """A store file renamed into place but cut short (a crash before the disk had it) is not taken as
    stored: its size differs from the header's."""
    files = {"train.py": b"print(1)\n"}
    _receive(tmp_path, files, {})
    stored = tmp_path / ".gpuprov" / "files" / hashlib.sha256(b"print(1)\n").hexdigest()
    stored.write_bytes(b"")
    first, _, done = _receive(tmp_path, files, {})
    assert isinstance(first, dict) and first["missing"] == [stored.name]
    assert stored.read_bytes() == b"print(1)\n" and done == {"ok": True}
