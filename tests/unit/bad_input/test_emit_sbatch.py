"""What `--emit-sbatch FILE` refuses, and why (issue 28, items 5 and 15).

It writes only a new file or over a regular file, atomically (a temp file beside it, renamed over it), and
leaves nothing behind when it cannot: a device node, a FIFO, a socket, a symbolic link or a directory is
refused with one line and exit 2 before anything is written, and stays what it was. `--hosts` names are
checked against the inventory, as for SSH launching: a script for hosts that do not exist is not written.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuprov.errors import BadInput
from gpuprov.launch import options, sbatch
from tests.unit import in_process
from tests.unit.bad_input.commands import one_error


def gpuprov(*args: str, cwd: Path, **env: str) -> in_process.Result:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GPUPROV_STATE_DIR": str(cwd / "state")}
    return in_process.gpuprov(*args, cwd=cwd, env={**base, **env})


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO"


def _socket(path: Path) -> str:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()
    return "a socket"


def _device(path: Path) -> str:
    try:  # a copy of /dev/null's node, in the test's own directory
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("this process may not make device nodes")
    return "a character device"


def _link_to_file(path: Path) -> str:
    (path.parent / "real.sbatch").write_text("the user's own file\n")
    path.symlink_to("real.sbatch")
    return "a symbolic link"


def _dangling_link(path: Path) -> str:
    path.symlink_to(path.parent / "nowhere" / "x")
    return "a symbolic link"


def _link_to_dir(path: Path) -> str:
    (path.parent / "d").mkdir()
    path.symlink_to("d")
    return "a symbolic link"


def _directory(path: Path) -> str:
    path.mkdir()
    return "a directory"


KINDS: dict[str, Callable[[Path], str]] = {
    "fifo": _fifo, "socket": _socket, "device": _device, "link": _link_to_file, "dangling": _dangling_link,
    "link-to-dir": _link_to_dir, "directory": _directory,
}  # fmt: skip


def _state(directory: Path) -> dict[str, tuple[int, str]]:
    """Every entry of the directory: its file type, and what a link points to."""
    return {
        p.name: (stat.S_IFMT(p.lstat().st_mode), os.readlink(p) if p.is_symlink() else "")
        for p in directory.iterdir()
    }


@pytest.mark.parametrize("kind", KINDS)
def test_emit_sbatch_writes_only_a_regular_file_or_a_new_path(work: Path, kind: str) -> None:
    target = work / "out" / "job.sbatch"
    target.parent.mkdir()
    what = KINDS[kind](target)
    before = _state(target.parent)
    content = {p.name: p.read_bytes() for p in target.parent.iterdir() if p.is_file() and not p.is_symlink()}
    proc = gpuprov("launch", "--nodes", "2", "--emit-sbatch", str(target), "train.py", cwd=work)
    line = one_error(proc, 2)
    assert f"--emit-sbatch {target} is {what}" in line
    assert "give a new file name or a regular file to replace" in line
    assert _state(target.parent) == before  # nothing renamed over it, no temp file left
    assert {p: (target.parent / p).read_bytes() for p in content} == content


@pytest.mark.parametrize("path", ["/dev/null", "/dev/zero", "/dev/stdout", "/proc/self/fd/1"])
def test_emit_sbatch_refuses_system_files(path: str) -> None:
    """Checked with the options alone: as root, a rename over /dev/null would break the system."""
    with pytest.raises(BadInput, match=rf"--emit-sbatch {path} is a (character device|symbolic link)"):
        options.build(script=__file__, nodes=2, emit_sbatch=path)


@pytest.mark.parametrize("existing", [None, b"an older script\n"], ids=["new", "regular"])
def test_emit_sbatch_writes_a_new_or_regular_file(work: Path, existing: bytes | None) -> None:
    target = work / "job.sbatch"
    if existing is not None:
        target.write_bytes(existing)
    proc = gpuprov("launch", "--nodes", "2", "--emit-sbatch", "job.sbatch", "train.py", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISREG(target.lstat().st_mode) and "#SBATCH --nodes=2" in target.read_text()
    assert sorted(p.name for p in work.iterdir() if p.name.startswith(".")) == []


def test_a_failed_write_leaves_nothing(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(work)
    opts = options.build(script="train.py", nodes=2, emit_sbatch="job.sbatch")

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(BadInput, match=r"job\.sbatch cannot be written: No space left"):
        sbatch.write(opts, ["train.py"])
    assert sorted(p.name for p in work.iterdir()) == ["inventory.ini", "train.py"]


# ----- 15. --hosts with --emit-sbatch names hosts of the inventory ------------------------------------------


@pytest.mark.parametrize("names", ["nosuch1,nosuch2", "node1,nosuch", "nosuch"])
def test_emit_sbatch_hosts_not_in_the_inventory(work: Path, names: str) -> None:
    proc = gpuprov("launch", "--hosts", names, "--emit-sbatch", "job.sbatch", "train.py", cwd=work)
    line = one_error(proc, 2)
    unknown = [n for n in names.split(",") if n.startswith("nosuch")]
    assert f"--hosts: {', '.join(unknown)} not in inventory.ini" in line
    assert not (work / "job.sbatch").exists()


@pytest.mark.parametrize("how", ["-i", "env", "default"])
def test_emit_sbatch_hosts_of_the_inventory(work: Path, how: str) -> None:
    args = ["-i", "inventory.ini"] if how == "-i" else []
    env = {"GPUPROV_INVENTORY": str(work / "inventory.ini")} if how == "env" else {}
    proc = gpuprov(
        "launch", *args, "--hosts", "node2,node1", "--emit-sbatch", "j.sbatch", "train.py", cwd=work, **env
    )
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --nodes=2\n" in (work / "j.sbatch").read_text()


def test_emit_sbatch_hosts_without_an_inventory(work: Path) -> None:
    (work / "inventory.ini").unlink()
    proc = gpuprov("launch", "--hosts", "a,b", "--emit-sbatch", "job.sbatch", "train.py", cwd=work)
    line = one_error(proc, 2)
    assert "--hosts a,b: no inventory to check the host names against" in line
    assert "give -i INVENTORY, or --nodes 2" in line
    assert not (work / "job.sbatch").exists()


def test_emit_sbatch_nodes_without_an_inventory(work: Path) -> None:
    """--nodes N needs no inventory: the script asks Slurm for N nodes, whichever they are."""
    (work / "inventory.ini").unlink()
    proc = gpuprov("launch", "--nodes", "3", "--emit-sbatch", "job.sbatch", "train.py", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --nodes=3\n" in (work / "job.sbatch").read_text()
